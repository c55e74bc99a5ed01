"""What the adapter reads anew on every job (an account's configuration) and what it keeps (time zones)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import gc
import weakref

import pytest

from calsync.core.model.calendar import Account, EventState
from calsync.core.model.errors import ConfigurationError, InvalidRequest
from calsync.providers.exchange.account_config import read_account_config
from calsync.providers.exchange.items import item_fields

_ACCOUNT = Account(
    id="acct-kept",
    tenant_id="t1",
    provider="exchange",
    address="kept@example.com",
    credentials={"username": "svc@example.com", "password": "svc-password"},
    options={"server_url": "https://mail.example.com/EWS/Exchange.asmx", "auth_type": "basic"},
)


def _copy(account: Account, **options: object) -> Account:
    # Fresh dicts, as the store hands out on every job.
    return dataclasses.replace(account, options={**account.options, **options}, credentials=dict(account.credentials))


def test_an_unchanged_account_reads_the_same() -> None:
    assert read_account_config(_copy(_ACCOUNT)) == read_account_config(_copy(_ACCOUNT))


def test_a_changed_credential_or_option_is_read_anew() -> None:
    first = read_account_config(_copy(_ACCOUNT))
    rotated = dataclasses.replace(_ACCOUNT, credentials={**_ACCOUNT.credentials, "password": "rotated"})
    assert read_account_config(rotated).fingerprint != first.fingerprint
    assert read_account_config(rotated).secrets == ("rotated",)
    assert read_account_config(_copy(_ACCOUNT, access_type="delegate")).access_type == "delegate"
    moved = dataclasses.replace(_copy(_ACCOUNT), id="acct-other")
    with pytest.raises(ConfigurationError, match="acct-other"):
        read_account_config(dataclasses.replace(moved, address="nobody"))


def test_a_value_equal_to_a_kept_one_but_of_another_type_is_validated_itself() -> None:
    assert read_account_config(_copy(_ACCOUNT, max_concurrency=1)).options.max_concurrency == 1
    with pytest.raises(ConfigurationError, match=r"options\.max_concurrency"):
        read_account_config(_copy(_ACCOUNT, max_concurrency=True))  # True == 1, but strict ints refuse it


def test_an_invalid_account_is_refused_every_time_even_with_unhashable_values() -> None:
    for _ in range(2):
        with pytest.raises(ConfigurationError, match=r"options\.colour: is not a known field"):
            read_account_config(_copy(_ACCOUNT, colour=["blue"]))
        with pytest.raises(ConfigurationError, match=r"options\.auth_type"):
            read_account_config(_copy(_ACCOUNT, auth_type="kerberos"))


def _event(time_zone: str) -> EventState:
    start = dt.datetime(2030, 1, 2, 10, 0)
    return EventState(id="evt-tz", tenant_id="t1", version=1, title="Standup", start=start,
                      end=start + dt.timedelta(minutes=30), time_zone=time_zone, all_day=False)  # fmt: skip


def test_a_time_zone_is_built_once_and_an_unknown_one_is_refused_every_time() -> None:
    zone = weakref.ref(item_fields(_event("Europe/Copenhagen"))["start"].tzinfo)
    gc.collect()  # exchangelib's own (weak) cache lets a zone go with the job's last item: ours keeps it
    assert zone() is not None
    assert item_fields(_event("Europe/Copenhagen"))["start"].tzinfo is zone()
    assert zone().ms_id == "Romance Standard Time"  # type: ignore[union-attr]
    assert item_fields(_event("Asia/Tokyo"))["start"].tzinfo.ms_id == "Tokyo Standard Time"
    for _ in range(2):
        with pytest.raises(InvalidRequest, match="Mars/Olympus"):
            item_fields(_event("Mars/Olympus"))

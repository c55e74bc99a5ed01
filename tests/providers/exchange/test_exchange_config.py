"""Account options and credentials are validated up front, naming the key and never echoing a value."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

import pytest
from exchangelib.errors import ErrorServerBusy

from calsync.core.model.errors import AuthRevoked, ConfigurationError, InvalidRequest, RateLimited
from calsync.providers.exchange.classification import classify
from tests.providers.exchange.ews_support import ExchangeRig


@pytest.mark.parametrize(
    ("options", "credentials", "complaint"),
    [
        ({"auth_type": None}, {}, "options.auth_type"),
        ({"auth_type": "kerberos"}, {}, "options.auth_type"),
        ({"server_url": None}, {}, "server_url is required unless autodiscover is true"),
        ({"server_url": "mail.example.com"}, {}, "options.server_url: must be an http(s) URL"),
        ({"access_type": "owner"}, {}, "options.access_type"),
        ({"colour": "blue"}, {}, "options.colour: is not a known field"),
        ({}, {"password": None}, "credentials.password"),
        ({}, {"pasword": "s3cret-typo"}, "credentials.pasword: is not a known field"),
        ({"auth_type": "oauth2"}, {"client_secret": "s3cret-typo"}, "credentials.client_id: is required"),
    ],
)
def test_bad_configuration_is_a_configuration_error_naming_the_key(
    options: dict[str, Any], credentials: dict[str, Any], complaint: str, rig: ExchangeRig
) -> None:
    provider, ews = rig.provider, rig.ews
    account = rig.make_account()
    merged_options = {k: v for k, v in {**account.options, **options}.items() if v is not None}
    if options.get("auth_type") == "oauth2":
        merged_credentials = {k: v for k, v in credentials.items() if v is not None}
    else:
        merged_credentials = {k: v for k, v in {**account.credentials, **credentials}.items() if v is not None}
    broken = dataclasses.replace(account, options=merged_options, credentials=merged_credentials)
    _, event, target = rig.triple(broken)

    with pytest.raises(ConfigurationError) as caught:
        provider.upsert(broken, event, target)

    assert complaint in str(caught.value)
    assert "s3cret-typo" not in str(caught.value)
    assert "svc-password" not in str(caught.value)
    assert ews.requests() == []


def test_the_mailbox_address_must_be_an_smtp_address(rig: ExchangeRig) -> None:
    account, event, target = rig.triple(rig.make_account("not-an-address"))
    with pytest.raises(ConfigurationError, match="SMTP address"):
        rig.provider.upsert(account, event, target)


@pytest.mark.parametrize(
    ("changes", "complaint"),
    [
        ({"time_zone": "Mars/Olympus_Mons"}, "has no Exchange equivalent"),
        ({"end": dt.datetime(2030, 1, 2, 9, 0)}, "ends"),
        ({"start": dt.date(2030, 1, 2), "end": dt.date(2030, 1, 3)}, "needs datetimes"),
        ({"all_day": True, "start": dt.date(2030, 1, 3), "end": dt.date(2030, 1, 2)}, "ends"),
    ],
)
def test_events_exchange_cannot_represent_are_invalid_requests_without_any_call(
    changes: dict[str, Any], complaint: str, rig: ExchangeRig
) -> None:
    provider, ews = rig.provider, rig.ews
    account, event, target = rig.triple(event=rig.make_event(**changes))
    with pytest.raises(InvalidRequest, match=complaint):
        provider.upsert(account, event, target)
    assert ews.requests() == []


def test_classified_messages_never_carry_a_secret_even_when_the_library_echoes_one() -> None:
    error = classify(
        ErrorServerBusy("proxy said: password=hunter22 rejected", back_off=3),
        operation="create",
        mailbox="alpha@example.com",
        secrets=["hunter22"],
    )
    assert isinstance(error, RateLimited)
    assert error.retry_after == 3
    assert "hunter22" not in str(error)
    assert "***" in str(error)


def test_ntlm_accounts_negotiate_ntlm_instead_of_sending_basic(rig: ExchangeRig) -> None:
    provider, ews = rig.provider, rig.ews
    # The emulator offers only Basic and Bearer, so an NTLM client gets no further than its opening request.
    account = rig.make_account(auth_type="ntlm", access_type="delegate", credentials={"username": "EXAMPLE\\svc"})
    _, event, target = rig.triple(account)

    with pytest.raises(AuthRevoked):
        provider.upsert(account, event, target)

    assert [(r["operation"], r["status"], r["auth"]) for r in ews.requests()] == [("GetFolder", 401, "rejected")]

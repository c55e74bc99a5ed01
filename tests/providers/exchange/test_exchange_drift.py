"""The Exchange adapter's read-back (SyncFolderItems + GetItem) through exchangelib against the EWS emulator."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from exchangelib import UTC, CalendarItem, EWSDateTime
from hypothesis import example, given

from calsync.core.model.drift import DriftReader, drift_reader
from calsync.core.model.errors import InvalidRequest, ProviderUnavailable
from calsync.providers.exchange.account_config import read_account_config
from calsync.providers.exchange.provider import ExchangeProvider, connect
from calsync_emulators.control import EwsControl
from tests.providers.exchange.ews_support import ExchangeRig
from tests.providers.fingerprint_support import CONTENT, LONE_CR, ROUND_TRIP, drawn_event


def _ops(ews: EwsControl, since: int) -> list[str | None]:
    return [r.get("operation") for r in ews.requests()[since:]]


def _seed(rig: ExchangeRig, count: int = 3) -> list[tuple[str, str]]:
    """``count`` events written by the adapter, as (sync key, ItemId)."""
    made = []
    for n in range(count):
        account, event, target = rig.triple(event=rig.make_event(id=f"evt-{n}", title=f"Meeting {n}"))
        ref = rig.provider.upsert(account, event, target)
        made.append((target.sync_key, ref.external_id))
    return made


def test_the_adapter_is_a_drift_reader(provider: ExchangeProvider) -> None:
    assert isinstance(drift_reader(provider), DriftReader)


def test_a_full_listing_holds_only_marked_items_with_the_fingerprint_of_what_was_written(rig: ExchangeRig) -> None:
    made = _seed(rig)
    account, event, target = rig.triple(event=rig.make_event(id="evt-0", title="Meeting 0"))
    own = rig.ews.items("alpha@example.com")[0]
    reading = rig.provider.read_back(account, None)
    assert reading.full and reading.cursor
    assert sorted((i.sync_key, i.external_id) for i in reading.items) == sorted(made)
    first = next(i for i in reading.items if i.sync_key == target.sync_key)
    assert first.etag == own["change_key"] and not first.removed
    assert first.fingerprint == rig.provider.fingerprint(account, event)
    assert first.fingerprint != rig.provider.fingerprint(account, rig.make_event(id="evt-0", title="Other"))


def test_an_unchanged_calendar_costs_one_request_and_keeps_its_cursor(rig: ExchangeRig) -> None:
    _seed(rig)
    account = rig.make_account()
    cursor = rig.provider.read_back(account, None).cursor
    since = len(rig.ews.requests())
    again = rig.provider.read_back(account, cursor)
    assert (again.items, again.full, again.cursor) == ([], False, cursor)
    assert _ops(rig.ews, since) == ["SyncFolderItems"]


def test_a_user_edit_and_delete_show_up_incrementally(rig: ExchangeRig) -> None:
    made = _seed(rig)
    account = rig.make_account()
    cursor = rig.provider.read_back(account, None).cursor
    rig.ews.edit_item(made[0][1], subject="Renamed by the user")
    rig.ews.delete_item(made[1][1])
    reading = rig.provider.read_back(account, cursor)
    assert not reading.full and reading.cursor != cursor
    by_id = {i.external_id: i for i in reading.items}
    assert set(by_id) == {made[0][1], made[1][1]}
    assert by_id[made[1][1]].removed and by_id[made[1][1]].sync_key is None
    edited = by_id[made[0][1]]
    assert edited.sync_key == made[0][0] and edited.etag == rig.ews.item(made[0][1])["change_key"]
    account_, event, _ = rig.triple(event=rig.make_event(id="evt-0", title="Meeting 0"))
    assert edited.fingerprint != rig.provider.fingerprint(account_, event)
    assert rig.provider.read_back(account, reading.cursor).items == []


def test_a_refused_sync_state_leads_to_one_full_listing_without_duplicates(rig: ExchangeRig) -> None:
    made = _seed(rig)
    account = rig.make_account()
    cursor = rig.provider.read_back(account, None).cursor
    rig.ews.expire_sync_states()
    since = len(rig.ews.requests())
    reading = rig.provider.read_back(account, cursor)
    assert reading.full
    assert sorted(i.external_id for i in reading.items) == sorted(i for _, i in made)
    assert _ops(rig.ews, since) == ["SyncFolderItems", "SyncFolderItems", "GetItem"]


def test_a_503_during_the_read_back_is_a_temporary_error(rig: ExchangeRig) -> None:
    _seed(rig, 1)
    rig.ews.add_fault(operation="SyncFolderItems", status=503, times=1)
    with pytest.raises(ProviderUnavailable):
        rig.provider.read_back(rig.make_account(), None)
    # An item-level error carries SyncState and IncludesLastItemInRange, which exchangelib reads before the code.
    rig.ews.add_fault(operation="SyncFolderItems", reason="ErrorMailboxStoreUnavailable", times=1)
    with pytest.raises(ProviderUnavailable, match=r"mailbox store or directory unavailable\): ErrorMailbox"):
        rig.provider.read_back(rig.make_account(), None)


def test_an_item_gone_before_its_getitem_is_removed_and_other_item_errors_raise(rig: ExchangeRig) -> None:
    made = _seed(rig, 1)
    account = rig.make_account()
    rig.ews.add_fault(operation="GetItem", reason="ErrorItemNotFound", times=1)
    [gone] = rig.provider.read_back(account, None).items
    assert (gone.external_id, gone.removed, gone.sync_key) == (made[0][1], True, None)
    rig.ews.add_fault(operation="GetItem", reason="ErrorInvalidIdMalformed", times=1)  # yielded, not raised
    with pytest.raises(InvalidRequest):
        rig.provider.read_back(account, None)


def test_the_users_own_items_cost_no_getitem(rig: ExchangeRig) -> None:
    account = rig.make_account()
    cursor = rig.provider.read_back(account, None).cursor
    _seed(rig, 1)
    own = CalendarItem(subject="Dentist", start=EWSDateTime(2030, 1, 3, 9, tzinfo=UTC),
                       end=EWSDateTime(2030, 1, 3, 10, tzinfo=UTC))  # fmt: skip
    mbx = connect(account, read_account_config(account), max_connections=1, timeout=10)
    own.account, own.folder = mbx.account, mbx.calendar
    own.save()
    since = len(rig.ews.requests())
    reading = rig.provider.read_back(account, cursor)
    assert len(reading.items) == 1 and reading.items[0].sync_key
    assert _ops(rig.ews, since) == ["SyncFolderItems", "GetItem"]
    assert len(rig.ews.requests("GetItem")[-1].get("response_codes", [])) == 1


@pytest.mark.parametrize("zone", ["Europe/Copenhagen", "America/New_York", "UTC"])
def test_an_all_day_item_reads_back_with_the_fingerprint_of_what_was_written(rig: ExchangeRig, zone: str) -> None:
    days = {"start": dt.date(2030, 3, 1), "end": dt.date(2030, 3, 3), "time_zone": zone, "all_day": True}
    account, event, target = rig.triple(event=rig.make_event(**days))
    rig.provider.upsert(account, event, target)
    [seen] = rig.provider.read_back(account, None).items
    assert seen.fingerprint == rig.provider.fingerprint(account, event)
    other = rig.make_event(**{**days, "end": dt.date(2030, 3, 4)})
    assert seen.fingerprint != rig.provider.fingerprint(account, other)


@ROUND_TRIP
@given(drawn=CONTENT)
@example(drawn=LONE_CR)
def test_exchange_reads_back_the_digest_of_what_it_wrote(rig: ExchangeRig, drawn: dict[str, Any]) -> None:
    rig.ews.reset()
    account, event, target = rig.triple(event=drawn_event(rig.make_event(), drawn))
    provider = rig.provider
    provider.upsert(account, event, target)
    [seen] = provider.read_back(account, None).items
    assert seen.fingerprint == provider.fingerprint(account, event)

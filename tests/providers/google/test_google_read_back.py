"""GoogleProvider.read_back against the emulator, through googleapiclient: listings, sync tokens, 410, faults."""

from __future__ import annotations

import dataclasses

import pytest

from calsync.core.model.calendar import Account, EventState, ExternalRef
from calsync.core.model.drift import ObservedItem, ReadBack, drift_reader
from calsync.core.model.errors import TemporaryError
from calsync.providers.google.event_body import SYNC_KEY_PROPERTY
from calsync.providers.google.provider import GoogleProvider
from tests.providers.google.gcal_support import CAL, Api, Emulator, body, make_event, target_for


def _write(provider: GoogleProvider, account: Account, count: int) -> list[tuple[EventState, ExternalRef]]:
    """``count`` events calsync wrote into the account's calendar, with what Google answered."""
    written = []
    for n in range(count):
        event = make_event(f"ev-{n}", title=f"Meeting {n}", attendees=("bob@example.com",))
        written.append((event, provider.upsert(account, event, target_for(event, account))))
    return written


def _lists(emulator: Emulator, since: int) -> list[tuple[str, str, int | None]]:
    """The API calls logged after the first ``since`` ones (the token endpoint's left out)."""
    return [(m, p, s) for m, p, s in emulator.calls()[since:] if p != "token"]


def _by_id(reading: ReadBack) -> dict[str, ObservedItem]:
    found = {item.external_id: item for item in reading.items}
    assert len(found) == len(reading.items), "an item was listed twice"
    return found


def test_the_adapter_is_a_drift_reader(provider: GoogleProvider) -> None:
    assert drift_reader(provider) is provider


def test_a_full_listing_holds_calsyncs_items_as_written_and_none_of_the_users(
    provider: GoogleProvider, account: Account, api: Api
) -> None:
    written = _write(provider, account, 3)
    api.run(api.events().insert(calendarId=CAL, body=body("usrone01", summary="Dentist")))
    gone = api.run(api.events().insert(calendarId=CAL, body=body("usrone02")))
    api.run(api.events().delete(calendarId=CAL, eventId=gone["id"]))

    reading = provider.read_back(account, None)

    assert reading.full and reading.cursor
    assert _by_id(reading) == {
        ref.external_id: ObservedItem(
            ref.external_id,
            target_for(event, account).sync_key,
            ref.etag,
            fingerprint=provider.fingerprint(account, event),
        )
        for event, ref in written
    }


def test_an_incremental_listing_reports_the_users_edit_and_delete_and_nothing_else(
    provider: GoogleProvider, account: Account, emulator: Emulator
) -> None:
    _, (edited_event, edited), (_, deleted) = _write(provider, account, 3)
    cursor = provider.read_back(account, None).cursor
    emulator.edit_event(CAL, edited.external_id, summary="Renamed by the user")
    emulator.delete_event(CAL, deleted.external_id)

    reading = provider.read_back(account, cursor)

    assert not reading.full and reading.cursor not in (None, cursor)
    found = _by_id(reading)
    assert set(found) == {edited.external_id, deleted.external_id}
    assert found[edited.external_id].etag != edited.etag
    assert found[edited.external_id].fingerprint != provider.fingerprint(account, edited_event)
    renamed = dataclasses.replace(edited_event, title="Renamed by the user")
    assert found[edited.external_id].fingerprint == provider.fingerprint(account, renamed)
    assert found[deleted.external_id].removed and found[deleted.external_id].fingerprint is None
    assert found[deleted.external_id].sync_key is not None  # the tombstone kept its body, marker included
    assert provider.read_back(account, reading.cursor).items == []


def test_an_unchanged_calendar_costs_one_request(
    provider: GoogleProvider, account: Account, emulator: Emulator
) -> None:
    _write(provider, account, 5)
    cursor = provider.read_back(account, None).cursor
    before = len(emulator.calls())

    reading = provider.read_back(account, cursor)

    assert (reading.items, reading.full) == ([], False)
    assert _lists(emulator, before) == [("GET", "events", 200)]
    listed = emulator.requests()[-1]["path"]
    assert listed == f"/calendar/v3/calendars/{CAL}/events"


def test_an_expired_sync_token_leads_to_one_full_listing_without_duplicates(
    provider: GoogleProvider, account: Account, emulator: Emulator
) -> None:
    written = _write(provider, account, 4)
    cursor = provider.read_back(account, None).cursor
    emulator.edit_event(CAL, written[0][1].external_id, location="Moved")
    emulator.configure(sync_token_lifetime=0)
    before = len(emulator.calls())

    reading = provider.read_back(account, cursor)

    assert reading.full and reading.cursor
    assert set(_by_id(reading)) == {ref.external_id for _, ref in written}
    assert _lists(emulator, before) == [("GET", "events", 410), ("GET", "events", 200)]


def test_pages_are_walked_to_the_sync_token_in_both_listings(
    provider: GoogleProvider, account: Account, emulator: Emulator
) -> None:
    written = _write(provider, account, 5)
    emulator.configure(page_limit=2)
    before = len(emulator.calls())
    full = provider.read_back(account, None)
    assert set(_by_id(full)) == {ref.external_id for _, ref in written}
    assert _lists(emulator, before) == [("GET", "events", 200)] * 3
    for _, ref in written:
        emulator.edit_event(CAL, ref.external_id, summary="All renamed")
    before = len(emulator.calls())

    incremental = provider.read_back(account, full.cursor)

    assert not incremental.full and len(_by_id(incremental)) == 5
    assert _lists(emulator, before) == [("GET", "events", 200)] * 3
    assert provider.read_back(account, incremental.cursor).items == []


def test_a_reduced_tombstone_is_a_removal_matched_by_its_id(
    provider: GoogleProvider, account: Account, emulator: Emulator
) -> None:
    ((_, ref),) = _write(provider, account, 1)
    cursor = provider.read_back(account, None).cursor
    emulator.configure(cancelled_retention=0)
    emulator.delete_event(CAL, ref.external_id)

    reading = provider.read_back(account, cursor)

    assert [(i.external_id, i.sync_key, i.removed) for i in reading.items] == [(ref.external_id, None, True)]


@pytest.mark.parametrize("incremental", [False, True], ids=["full", "incremental"])
def test_a_503_during_read_back_is_a_temporary_error_and_no_reading(
    provider: GoogleProvider, account: Account, emulator: Emulator, incremental: bool
) -> None:
    written = _write(provider, account, 3)
    cursor = provider.read_back(account, None).cursor if incremental else None
    for _, ref in written:
        emulator.edit_event(CAL, ref.external_id, summary="Renamed")
    emulator.configure(page_limit=2)
    # The second page fails: a listing that did not reach its last page returns nothing, and is no 410.
    emulator.fault(method="GET", path="/events$", query="pageToken=", status=503, times=1)

    with pytest.raises(TemporaryError):
        provider.read_back(account, cursor)
    again = provider.read_back(account, cursor)
    assert (again.full, len(_by_id(again))) == (not incremental, 3)


def test_items_carry_the_marker_as_their_sync_key(provider: GoogleProvider, account: Account, api: Api) -> None:
    ((event, ref),) = _write(provider, account, 1)
    stored = api.run(api.events().get(calendarId=CAL, eventId=ref.external_id))
    (item,) = provider.read_back(account, None).items
    assert (
        item.sync_key
        == stored["extendedProperties"]["private"][SYNC_KEY_PROPERTY]
        == target_for(event, account).sync_key
    )


def test_inviting_the_calendars_owner_reads_back_as_written(provider: GoogleProvider, account: Account) -> None:
    event = make_event(attendees=("bob@example.com", account.address))
    ref = provider.upsert(account, event, target_for(event, account))
    (item,) = provider.read_back(account, None).items
    assert (item.external_id, item.fingerprint) == (ref.external_id, provider.fingerprint(account, event))

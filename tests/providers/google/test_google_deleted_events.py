"""An event deleted in Google, then changed locally, ends as exactly one live event, whatever Google allows."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from calsync.core.model.calendar import Account
from calsync.core.model.errors import FullSyncRequired, ProviderUnavailable
from calsync.providers.google.event_body import SYNC_KEY_PROPERTY, event_id_for
from calsync.providers.google.provider import GoogleProvider
from tests.providers.google.gcal_support import Api, Emulator, make_event, target_for

CAL = "alice@example.com"
#: restore: PUT of a cancelled event brings it back; forbidden: Google answers 403 (as reported).
MODES = ("restore", "forbidden")


def live(api: Api) -> list[dict[str, Any]]:
    """The calendar's events that are not cancelled."""
    return [e for e in api.list_all(CAL) if e["status"] != "cancelled"]


@pytest.fixture(params=MODES)
def mode(request: pytest.FixtureRequest, emulator: Emulator) -> str:
    """Each test runs under both answers Google may give to a write of a cancelled event."""
    emulator.configure(deleted_writes=request.param)
    return str(request.param)


def test_deleted_in_google_then_updated_locally_is_one_live_event(
    mode: str, provider: GoogleProvider, account: Account, api: Api
) -> None:
    event = make_event()
    target = target_for(event, account)
    created = provider.upsert(account, event, target)
    api.run(api.events().delete(calendarId=CAL, eventId=created.external_id))

    synced = dataclasses.replace(target, external_id=created.external_id, etag=created.etag, synced_version=1)
    ref = provider.upsert(account, dataclasses.replace(event, version=2, title="Changed"), synced)

    [only] = live(api)
    assert (only["id"], only["summary"], ref.etag) == (ref.external_id, "Changed", only["etag"])
    generation = 0 if mode == "restore" else 1
    assert ref.external_id == event_id_for(target.sync_key, generation)
    assert only["extendedProperties"]["private"][SYNC_KEY_PROPERTY] == target.sync_key


def test_a_retry_after_a_lost_re_create_does_not_duplicate(
    mode: str, provider: GoogleProvider, account: Account, api: Api, emulator: Emulator
) -> None:
    event = make_event()
    target = target_for(event, account)
    created = provider.upsert(account, event, target)
    api.run(api.events().delete(calendarId=CAL, eventId=created.external_id))
    synced = dataclasses.replace(target, external_id=created.external_id, etag=created.etag, synced_version=1)
    changed = dataclasses.replace(event, version=2, title="Changed")
    # The write that re-creates (PUT when restoring, else the next generation's insert) lands; its answers get lost.
    method = "PUT" if mode == "restore" else "POST"
    emulator.fault(method=method, path="/events", after=True, drop=True, times=2)
    with pytest.raises(ProviderUnavailable):
        provider.upsert(account, changed, synced)

    again = provider.upsert(account, changed, synced)  # the job's retry, with the same recorded state
    [only] = live(api)
    assert (only["id"], only["summary"], only["etag"]) == (again.external_id, "Changed", again.etag)


def test_delete_without_a_recorded_id_finds_the_live_generation(
    mode: str, provider: GoogleProvider, account: Account, api: Api
) -> None:
    event = make_event()
    target = target_for(event, account)
    created = provider.upsert(account, event, target)
    api.run(api.events().delete(calendarId=CAL, eventId=created.external_id))
    synced = dataclasses.replace(target, external_id=created.external_id, etag=created.etag, synced_version=1)
    provider.upsert(account, dataclasses.replace(event, version=2), synced)

    provider.delete(account, target)  # the create's answer was never recorded
    assert live(api) == []


def test_a_410_that_is_not_deleted_fails_the_delete(
    provider: GoogleProvider, account: Account, emulator: Emulator
) -> None:
    event = make_event()
    target = target_for(event, account)
    emulator.fault(method="DELETE", status=410, reason="fullSyncRequired")
    with pytest.raises(FullSyncRequired):
        provider.delete(account, target)
    emulator.clear_faults()
    emulator.fault(method="DELETE", status=410, reason="deleted", times=1)
    provider.delete(account, target)  # gone already: done (then the next generation's id: 404)


def test_cancelling_an_event_deleted_in_google_writes_nothing(
    mode: str, provider: GoogleProvider, account: Account, api: Api, emulator: Emulator
) -> None:
    event = make_event()
    target = target_for(event, account)
    created = provider.upsert(account, event, target)
    api.run(api.events().delete(calendarId=CAL, eventId=created.external_id))
    synced = dataclasses.replace(target, external_id=created.external_id, etag=created.etag, synced_version=1)
    before = len(emulator.requests())

    provider.upsert(account, dataclasses.replace(event, version=2, status="cancelled"), synced)
    assert [c[0] for c in emulator.calls()[before:] if c[1] != "token"] == ["PUT", "GET"]
    assert live(api) == [] and len(api.list_all(CAL)) == 1

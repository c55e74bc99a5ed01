"""Sweeps of a Google account end to end: the sweep job, the Google adapter on googleapiclient, the emulator.

The user's edits and deletes are the emulator's control routes (new etag, a cancelled tombstone). Under enforce an
event the user deleted reappears and an edited title is restored within one sweep; under report the deletion is
recorded and notified (``standardwebhooks``); an orphan with calsync's marker is removed; an expired sync token
costs one full listing and no duplicate; an unchanged calendar one request; a 503 is retried, never a finding.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from calsync.core.model.calendar import Target
from calsync.core.model.errors import TemporaryError
from calsync.core.store.crypto import generate_key
from calsync.providers.google.event_body import SYNC_KEY_PROPERTY, event_id_for
from calsync_emulators.server import RunningEmulator
from tests.drift.conftest import Drift
from tests.integration.provider_support import add_account
from tests.providers.google.gcal_support import Api, Emulator
from tests.support import wait_until
from tests.webhooks.receiver import Receiver

pytestmark = pytest.mark.integration

CALENDAR = "alice@example.com"


@pytest.fixture
def emulator(google_server: RunningEmulator) -> Emulator:
    """The session's Google emulator, reset for this test."""
    return Emulator.fresh(google_server)


@pytest.fixture
def gdrift(drift_factory: Callable[..., Drift], emulator: Emulator) -> Drift:
    """A drift pipeline whose Google adapter talks to the emulator."""
    return drift_factory(secret_key=generate_key(), google_api_endpoint=emulator.api_endpoint)


@pytest.fixture
def account(gdrift: Drift, emulator: Emulator) -> str:
    """A Google account (user OAuth) of tenant-1 writing into ``alice@example.com``."""
    return add_account(gdrift.pipeline, "google", CALENDAR, emulator.user_credentials(), account_id="acc-alice")


def _calendar_calls(emulator: Emulator, since: int) -> list[tuple[str, int | None]]:
    return [(r["method"], r["status"]) for r in emulator.requests()[since:] if r["path"].startswith("/calendar/")]


def _stored(api: Api, event_id: str) -> dict[str, Any]:
    found: dict[str, Any] = api.run(api.events().get(calendarId=CALENDAR, eventId=event_id))
    return found


def test_under_enforce_an_event_the_user_deleted_reappears_after_one_sweep(
    gdrift: Drift, account: str, emulator: Emulator
) -> None:
    event, external_id = gdrift.synced(account, title="Planning")
    gdrift.policy("enforce")
    assert gdrift.sweep(account).full  # the baseline: a cursor
    emulator.delete_event(CALENDAR, external_id)

    [finding] = gdrift.sweep(account).findings
    assert (finding.kind, finding.action, finding.external_id) == ("deleted_externally", "repaired", external_id)
    with gdrift.pipeline.worker():
        row = gdrift.pipeline.wait_target(event, account, "synced")
    stored = _stored(Api(emulator), external_id)
    assert (stored["status"], stored["summary"], row.external_id) == ("confirmed", "Planning", external_id)
    after = gdrift.sweep(account)  # the repair, seen as calsync wrote it
    assert (after.findings, after.verified) == ([], 1)


def test_under_enforce_an_edited_title_is_restored(gdrift: Drift, account: str, emulator: Emulator) -> None:
    event, external_id = gdrift.synced(account, title="Planning", location="Room 1")
    gdrift.policy("enforce")
    gdrift.sweep(account)
    emulator.edit_event(CALENDAR, external_id, summary="Mine now")

    [finding] = gdrift.sweep(account).findings
    assert (finding.kind, finding.action) == ("modified_externally", "repaired")
    with gdrift.pipeline.worker():
        gdrift.pipeline.wait_target(event, account, "synced")
    stored = _stored(Api(emulator), external_id)
    assert (stored["summary"], stored["location"]) == ("Planning", "Room 1")


def test_an_edit_of_a_field_calsync_does_not_own_is_no_drift(gdrift: Drift, account: str, emulator: Emulator) -> None:
    _, external_id = gdrift.synced(account, title="Planning")
    gdrift.sweep(account)
    emulator.edit_event(CALENDAR, external_id, colorId="5")  # a new etag, the owned fields as written
    result = gdrift.sweep(account)
    assert (result.findings, result.verified) == ([], 1)


def test_under_enforce_an_orphan_with_calsyncs_marker_is_deleted(
    gdrift: Drift, account: str, emulator: Emulator
) -> None:
    _, external_id = gdrift.synced(account, title="Planning")
    gdrift.policy("enforce")
    api = Api(emulator)
    ghost = Target("ghost", account, "tenant-1")
    orphan_id = event_id_for(ghost.sync_key)
    body = {"id": orphan_id, "summary": "Left behind", "start": {"date": "2026-12-01"}, "end": {"date": "2026-12-02"},
            "extendedProperties": {"private": {SYNC_KEY_PROPERTY: ghost.sync_key}}}  # fmt: skip
    api.run(api.events().insert(calendarId=CALENDAR, body=body))

    [finding] = gdrift.sweep(account).findings  # the first sweep: a full listing
    assert (finding.kind, finding.action, finding.external_id) == ("unknown_item", "repaired", orphan_id)
    assert (_stored(api, orphan_id)["status"], _stored(api, external_id)["status"]) == ("cancelled", "confirmed")


def test_under_report_a_deletion_is_recorded_and_notified_and_nothing_changes(
    gdrift: Drift, account: str, emulator: Emulator, receiver: Receiver
) -> None:
    event, external_id = gdrift.synced(account, title="Planning")
    gdrift.endpoint(receiver, "event.drifted")
    gdrift.sweep(account)
    emulator.delete_event(CALENDAR, external_id)

    [finding] = gdrift.sweep(account).findings
    assert (finding.kind, finding.action) == ("deleted_externally", "reported")
    with gdrift.pipeline.worker():
        wait_until(lambda: receiver.verified(), what="the event.drifted webhook")
    [delivered] = receiver.verified()
    assert delivered.payload["type"] == "event.drifted"
    assert (delivered.payload["data"]["entity_id"], delivered.payload["data"]["drift_kind"]) == (
        event, "deleted_externally")  # fmt: skip
    assert _stored(Api(emulator), external_id)["status"] == "cancelled"  # not put back
    assert gdrift.sweep(account).findings == []


def test_an_unchanged_calendar_costs_one_request_per_sweep(gdrift: Drift, account: str, emulator: Emulator) -> None:
    for title in ("One", "Two", "Three"):
        gdrift.synced(account, title=title)
    gdrift.sweep(account)
    for _ in range(3):
        before = len(emulator.requests())
        result = gdrift.sweep(account)
        assert (result.full, result.findings) == (False, [])
        assert _calendar_calls(emulator, before) == [("GET", 200)]


def test_an_expired_sync_token_costs_one_full_listing_and_no_duplicate(
    gdrift: Drift, account: str, emulator: Emulator
) -> None:
    event, _ = gdrift.synced(account, title="Planning")
    gdrift.policy("enforce")
    gdrift.sweep(account)
    emulator.configure(sync_token_lifetime=0)
    before = len(emulator.requests())

    result = gdrift.sweep(account)

    assert (result.full, result.findings, result.verified) == (True, [], 1)
    assert _calendar_calls(emulator, before) == [("GET", 410), ("GET", 200)]
    assert [e["id"] for e in Api(emulator).list_all(CALENDAR)] == [gdrift.pipeline.target(event, account).external_id]


def test_a_503_during_a_sweep_is_retried_and_never_a_finding(gdrift: Drift, account: str, emulator: Emulator) -> None:
    event, _ = gdrift.synced(account, title="Planning")
    gdrift.sweep(account)
    emulator.fault(method="GET", path="/events$", status=503, times=1)

    with pytest.raises(TemporaryError):
        gdrift.sweep(account)
    assert gdrift.findings() == []
    state = gdrift.state(account)
    assert state is not None and state.failures == 1
    result = gdrift.sweep(account)
    assert (result.findings, result.full) == ([], False)
    assert gdrift.pipeline.target(event, account).drift_kind is None

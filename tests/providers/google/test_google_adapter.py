"""GoogleProvider against the emulator, through the real googleapiclient/google-auth/httplib2 stack."""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
import threading

import httplib2
import pytest

from calsync.core.model.calendar import Account, Target
from calsync.core.model.errors import (
    InvalidRequest,
    ProviderUnavailable,
    TemporaryError,
)
from calsync.providers.google.event_body import SYNC_KEY_PROPERTY, VERSION_PROPERTY, event_id_for
from calsync.providers.google.provider import GoogleProvider
from tests.providers.google.gcal_support import CAL, Api, Emulator, make_event, only_event, target_for
from tests.support import in_threads

# --- ids -----------------------------------------------------------------------------------------


def test_event_ids_are_deterministic_base32hex() -> None:
    first = event_id_for("tenant-1:ev-1:acct-1")
    assert first == event_id_for("tenant-1:ev-1:acct-1")
    assert re.fullmatch(r"[a-v0-9]{52}", first)
    assert first != event_id_for("tenant-1:ev-1:acct-2")


# --- round trips ---------------------------------------------------------------------------------


def test_create_update_delete_round_trip(provider: GoogleProvider, account: Account, api: Api) -> None:
    event = make_event(attendees=("bob@example.com",), location="Room 1", description="Agenda")
    target = target_for(event, account)

    created = provider.upsert(account, event, target)
    stored = only_event(api)
    assert created.external_id == event_id_for(target.sync_key) == stored["id"]
    assert created.etag == stored["etag"]
    assert stored["summary"] == "Planning"
    assert (stored["location"], stored["description"]) == ("Room 1", "Agenda")
    assert stored["start"] == {"dateTime": "2026-12-01T09:00:00+01:00", "timeZone": "Europe/Berlin"}
    assert stored["end"] == {"dateTime": "2026-12-01T10:00:00+01:00", "timeZone": "Europe/Berlin"}
    assert [a["email"] for a in stored["attendees"]] == ["bob@example.com"]
    assert stored["extendedProperties"]["private"] == {SYNC_KEY_PROPERTY: target.sync_key, VERSION_PROPERTY: "1"}

    changed = dataclasses.replace(event, version=2, title="Planning (moved)", location=None, attendees=())
    synced = dataclasses.replace(target, external_id=created.external_id, etag=created.etag, synced_version=1)
    updated = provider.upsert(account, changed, synced)
    stored = only_event(api)
    assert updated.external_id == created.external_id
    assert updated.etag == stored["etag"] != created.etag
    assert stored["summary"] == "Planning (moved)"
    assert "location" not in stored
    assert stored["extendedProperties"]["private"][VERSION_PROPERTY] == "2"

    provider.delete(account, dataclasses.replace(synced, etag=updated.etag))
    assert only_event(api)["status"] == "cancelled"


def test_update_sends_if_match_and_send_updates(provider: GoogleProvider, account: Account, emulator: Emulator) -> None:
    event = make_event(send_updates="external_only")
    created = provider.upsert(account, event, target_for(event, account))
    synced = target_for(event, account, external_id=created.external_id, etag=created.etag)
    provider.upsert(account, dataclasses.replace(event, send_updates="all"), synced)
    provider.delete(account, synced, send_updates="none")
    writes = [r for r in emulator.requests() if r["method"] != "POST" or r["path"] != "/token"]
    assert [(r["method"], r.get("send_updates"), r.get("if_match")) for r in writes] == [
        ("POST", "externalOnly", None),
        ("PUT", "all", created.etag),
        ("DELETE", "none", None),
    ]


def test_all_day_and_aware_timed_events(provider: GoogleProvider, account: Account, api: Api) -> None:
    all_day = make_event("ev-day", all_day=True, start=dt.date(2026, 12, 24), end=dt.date(2026, 12, 26))
    provider.upsert(account, all_day, target_for(all_day, account))
    aware = make_event(
        "ev-aware",
        start=dt.datetime(2026, 12, 1, 9, 0, tzinfo=dt.timezone(dt.timedelta(hours=1))),
        end=dt.datetime(2026, 12, 1, 9, 30, tzinfo=dt.timezone(dt.timedelta(hours=1))),
    )
    provider.upsert(account, aware, target_for(aware, account))
    by_key = {e["extendedProperties"]["private"][SYNC_KEY_PROPERTY]: e for e in api.list_all(CAL)}
    day = by_key[target_for(all_day, account).sync_key]
    assert (day["start"], day["end"]) == ({"date": "2026-12-24"}, {"date": "2026-12-26"})
    timed = by_key[target_for(aware, account).sync_key]
    assert timed["start"] == {"dateTime": "2026-12-01T09:00:00+01:00", "timeZone": "Europe/Berlin"}


def test_timed_event_with_dates_is_invalid(provider: GoogleProvider, account: Account) -> None:
    event = make_event(start=dt.date(2026, 12, 1), end=dt.date(2026, 12, 2))
    with pytest.raises(InvalidRequest):
        provider.upsert(account, event, target_for(event, account))


def test_calendar_id_option(provider: GoogleProvider, account: Account, api: Api) -> None:
    shared = dataclasses.replace(account, options={"calendar_id": "team/room@example.com"})
    event = make_event()
    provider.upsert(shared, event, target_for(event, shared))
    assert only_event(api, "team/room@example.com")["summary"] == "Planning"
    assert api.list_all(CAL) == []


# --- idempotent create ---------------------------------------------------------------------------


def test_409_adopts_the_earlier_create(provider: GoogleProvider, account: Account, api: Api) -> None:
    event = make_event(version=3, title="Wanted")
    target = target_for(event, account)
    earlier = make_event(version=2, title="Older attempt")
    first = provider.upsert(account, earlier, target)

    adopted = provider.upsert(account, event, target)  # the pipeline never saw the first result
    stored = only_event(api)
    assert adopted.external_id == first.external_id == stored["id"]
    assert (stored["summary"], stored["extendedProperties"]["private"][VERSION_PROPERTY]) == ("Wanted", "3")
    assert adopted.etag == stored["etag"]


def test_409_refuses_an_event_calsync_did_not_create(provider: GoogleProvider, account: Account, api: Api) -> None:
    event = make_event()
    target = target_for(event, account)
    squatter = {"id": event_id_for(target.sync_key), "start": {"date": "2026-12-01"}, "end": {"date": "2026-12-02"}}
    api.run(api.events().insert(calendarId=CAL, body=squatter))
    with pytest.raises(InvalidRequest, match="not created by calsync"):
        provider.upsert(account, event, target)


def test_lost_insert_response_then_job_retry_makes_one_event(
    provider: GoogleProvider, account: Account, emulator: Emulator, api: Api
) -> None:
    # The insert lands but both answers are lost (httplib2 re-sends a POST once on a dropped connection,
    # docs/notes/google-calendar.md): a crash before commit.
    emulator.fault(method="POST", path="/events$", after=True, drop=True, times=2)
    event = make_event()
    target = target_for(event, account)
    with pytest.raises(ProviderUnavailable):
        provider.upsert(account, event, target)
    assert only_event(api)["status"] == "confirmed"

    retried = provider.upsert(account, event, target)
    assert retried.external_id == only_event(api)["id"] == event_id_for(target.sync_key)
    assert retried.etag == only_event(api)["etag"]


def test_lost_insert_response_recovered_within_the_call(
    provider: GoogleProvider, account: Account, emulator: Emulator, api: Api
) -> None:
    emulator.fault(method="POST", path="/events$", after=True, drop=True, times=1)
    event = make_event()
    ref = provider.upsert(account, event, target_for(event, account))
    # The event the lost insert made already shows our state (its times in another notation): no write.
    assert emulator.calls()[1:] == [
        ("POST", "events", None),
        ("POST", "events", 409),
        ("GET", ref.external_id, 200),
    ]
    assert ref.etag == only_event(api)["etag"]


def test_recreate_after_delete_restores_the_same_event(provider: GoogleProvider, account: Account, api: Api) -> None:
    event = make_event()
    target = target_for(event, account)
    created = provider.upsert(account, event, target)
    provider.delete(account, dataclasses.replace(target, external_id=created.external_id))
    assert only_event(api)["status"] == "cancelled"

    again = provider.upsert(account, dataclasses.replace(event, version=2, title="Back"), target)
    stored = only_event(api)
    assert again.external_id == created.external_id == stored["id"]
    assert (stored["status"], stored["summary"]) == ("confirmed", "Back")


def test_update_of_a_vanished_id_creates(provider: GoogleProvider, account: Account, api: Api) -> None:
    event = make_event()
    target = target_for(event, account, external_id="gone00000000", etag='"1"')
    ref = provider.upsert(account, event, target)
    assert ref.external_id == event_id_for(target.sync_key) == only_event(api)["id"]


# --- optimistic concurrency ----------------------------------------------------------------------


def test_412_rereads_and_reapplies_keeping_foreign_fields(
    provider: GoogleProvider, account: Account, api: Api, emulator: Emulator
) -> None:
    event = make_event(attendees=("bob@example.com",))
    created = provider.upsert(account, event, target_for(event, account))
    # Someone edits the event in Google Calendar: a colour, an RSVP, a property of another app.
    api.run(
        api.events().patch(
            calendarId=CAL,
            eventId=created.external_id,
            body={
                "summary": "Edited in Google",
                "colorId": "5",
                "attendees": [{"email": "bob@example.com", "responseStatus": "accepted"}],
                "extendedProperties": {"private": {"otherApp": "x"}},
            },
        )
    )
    newer = dataclasses.replace(event, version=2, title="Ours")
    stale = target_for(event, account, external_id=created.external_id, etag=created.etag)
    ref = provider.upsert(account, newer, stale)
    assert emulator.calls()[-3:] == [
        ("PUT", created.external_id, 412),
        ("GET", created.external_id, 200),
        ("PUT", created.external_id, 200),
    ]

    stored = only_event(api)
    assert ref.etag == stored["etag"]
    assert (stored["summary"], stored["colorId"]) == ("Ours", "5")
    assert stored["attendees"] == [{"email": "bob@example.com", "responseStatus": "accepted"}]
    assert stored["extendedProperties"]["private"]["otherApp"] == "x"


def test_412_forever_is_temporary(provider: GoogleProvider, account: Account, emulator: Emulator) -> None:
    event = make_event()
    created = provider.upsert(account, event, target_for(event, account))
    emulator.fault(method="PUT", status=412)
    synced = target_for(event, account, external_id=created.external_id, etag=created.etag)
    with pytest.raises(TemporaryError, match="changed under us"):
        provider.upsert(account, dataclasses.replace(event, version=2, title="Moved"), synced)


def test_update_restores_an_event_deleted_in_google(provider: GoogleProvider, account: Account, api: Api) -> None:
    event = make_event()
    created = provider.upsert(account, event, target_for(event, account))
    api.run(api.events().delete(calendarId=CAL, eventId=created.external_id))
    synced = target_for(event, account, external_id=created.external_id, etag=created.etag)
    provider.upsert(account, dataclasses.replace(event, version=2), synced)
    assert only_event(api)["status"] == "confirmed"


# --- delete --------------------------------------------------------------------------------------


def test_delete_of_missing_or_deleted_event_succeeds(
    provider: GoogleProvider, account: Account, emulator: Emulator
) -> None:
    event = make_event()
    target = target_for(event, account)
    provider.delete(account, target)  # never created: 404
    provider.upsert(account, event, target)
    provider.delete(account, target)  # no external id recorded: found by its deterministic id
    provider.delete(account, target)  # already cancelled: 410, so the next generation's id is tried: 404
    assert [c[2] for c in emulator.calls() if c[0] == "DELETE"] == [404, 204, 410, 404]


# --- concurrency ---------------------------------------------------------------------------------


def test_eight_threads_have_no_cross_talk(provider: GoogleProvider, account: Account, api: Api) -> None:
    rounds = 6
    start = threading.Barrier(8)
    failures: list[str] = []
    finals: dict[str, tuple[str, str | None]] = {}
    resources: dict[int, list[object]] = {}

    def worker(n: int) -> None:
        event = make_event(f"ev-{n}", title=f"thread {n} round 0")
        target = target_for(event, account)
        start.wait()
        try:
            ref = provider.upsert(account, event, target)
            for round_ in range(1, rounds):
                synced = dataclasses.replace(target, external_id=ref.external_id, etag=ref.etag)
                changed = dataclasses.replace(event, version=round_ + 1, title=f"thread {n} round {round_}")
                ref = provider.upsert(account, changed, synced)
                if ref.external_id != event_id_for(target.sync_key):
                    failures.append(f"thread {n} got {ref.external_id}")
            finals[target.sync_key] = (f"thread {n} round {rounds - 1}", ref.etag)
            resources[n] = [provider._events(), provider._events()]
        except Exception as exc:  # collected and asserted below; a thread can't fail the test itself
            failures.append(f"thread {n}: {exc!r}")

    in_threads(worker, 8)
    assert failures == []
    # One events resource per thread, built once: never shared, never rebuilt per call.
    assert all(first is again for first, again in resources.values())
    assert len({id(first) for first, _ in resources.values()}) == 8
    stored = {e["extendedProperties"]["private"][SYNC_KEY_PROPERTY]: e for e in api.list_all(CAL)}
    assert {key: (e["summary"], e["etag"]) for key, e in stored.items()} == finals
    assert len(stored) == 8


def test_event_id_ignores_sync_state() -> None:
    one = Target(event_id="e", account_id="a", tenant_id="t", external_id="x", etag="1", synced_version=4)
    assert event_id_for(one.sync_key) == event_id_for(Target(event_id="e", account_id="a", tenant_id="t").sync_key)


def test_close_closes_the_service_and_every_thread_s_connections_then_reconnects(
    provider: GoogleProvider, account: Account, api: Api, monkeypatch: pytest.MonkeyPatch
) -> None:
    closed: list[httplib2.Http] = []
    real_close = httplib2.Http.close

    def recording_close(http: httplib2.Http) -> None:
        closed.append(http)
        real_close(http)

    monkeypatch.setattr(httplib2.Http, "close", recording_close)
    first, second = make_event("ev-1"), make_event("ev-2")
    provider.upsert(account, first, target_for(first, account))
    other = threading.Thread(target=provider.upsert, args=(account, second, target_for(second, account)))
    other.start()
    other.join()

    provider.close()

    assert len({id(http) for http in closed}) == 3  # the service's own and one per calling thread
    changed = dataclasses.replace(first, version=2, title="after close")
    provider.upsert(account, changed, target_for(first, account))
    assert {e["summary"] for e in api.list_all(CAL)} == {"after close", second.title}

"""The emulator's control routes that change or delete an event as its owner did in Calendar's UI."""

from __future__ import annotations

import urllib.error

import pytest

from tests.providers.google.gcal_support import CAL, Api, Emulator, body


def _synced(api: Api, event_id: str) -> tuple[dict[str, str], str]:
    """Insert an event and return it with the sync token of a full listing taken after it."""
    created = api.run(api.events().insert(calendarId=CAL, body=body(event_id, location="Room 1")))
    listing = api.run(api.events().list(calendarId=CAL, showDeleted=True))
    return created, listing["nextSyncToken"]


def test_a_user_edit_is_a_new_version_that_an_incremental_list_reports(emulator: Emulator, api: Api) -> None:
    created, token = _synced(api, "usr00001")
    logged = len(emulator.requests())

    edited = emulator.edit_event(CAL, "usr00001", summary="Renamed", location=None)

    assert edited["summary"] == "Renamed" and "location" not in edited
    assert edited["etag"] != created["etag"] and edited["updated"] >= created["updated"]
    assert len(emulator.requests()) == logged  # the user's edit is not an API request
    changed = api.run(api.events().list(calendarId=CAL, syncToken=token))
    assert [(e["id"], e["summary"], e["etag"]) for e in changed["items"]] == [("usr00001", "Renamed", edited["etag"])]
    assert api.run(api.events().get(calendarId=CAL, eventId="usr00001"))["etag"] == edited["etag"]


def test_a_user_delete_leaves_the_tombstone_an_incremental_list_reports(emulator: Emulator, api: Api) -> None:
    created, token = _synced(api, "usr00002")

    emulator.delete_event(CAL, "usr00002")

    changed = api.run(api.events().list(calendarId=CAL, syncToken=token))["items"]
    assert [(e["id"], e["status"]) for e in changed] == [("usr00002", "cancelled")]
    assert changed[0]["etag"] != created["etag"]
    assert api.run(api.events().list(calendarId=CAL))["items"] == []  # hidden without showDeleted
    with pytest.raises(urllib.error.HTTPError) as again:
        emulator.delete_event(CAL, "usr00002")
    assert again.value.code == 410


def test_user_edits_of_what_the_ui_does_not_show_or_google_refuses(emulator: Emulator, api: Api) -> None:
    _synced(api, "usr00003")
    refused = {"end": {"date": "2026-11-01"}}  # before its start: Google answers 400 timeRangeEmpty
    with pytest.raises(urllib.error.HTTPError) as bad:
        emulator.edit_event(CAL, "usr00003", **refused)
    assert bad.value.code == 400
    emulator.delete_event(CAL, "usr00003")
    with pytest.raises(urllib.error.HTTPError) as cancelled:
        emulator.edit_event(CAL, "usr00003", summary="x")
    with pytest.raises(urllib.error.HTTPError) as unknown:
        emulator.delete_event(CAL, "nope1")
    assert (cancelled.value.code, unknown.value.code) == (404, 404)
    assert api.run(api.events().get(calendarId=CAL, eventId="usr00003"))["status"] == "cancelled"


def test_the_calendars_own_attendee_entry_is_marked_and_the_flags_are_read_only(api: Api) -> None:
    people = [{"email": CAL.upper()}, {"email": "bob@example.com", "self": True, "organizer": True}]
    created = api.run(api.events().insert(calendarId=CAL, body=body("usr00004", attendees=people)))
    assert [(a["email"], a.get("self"), a.get("organizer")) for a in created["attendees"]] == [
        (CAL.upper(), True, True),
        ("bob@example.com", None, None),
    ]

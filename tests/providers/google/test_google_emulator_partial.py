"""The emulator's partial responses (``fields`` on events.list), through the real client, and its selector parser."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from calsync_emulators.google.errors import ApiError
from calsync_emulators.google.partial import parse
from tests.providers.google.gcal_support import CAL, Api, body, error_json, http_error


def test_a_listing_answers_only_the_selected_fields(api: Api) -> None:
    api.run(api.events().insert(calendarId=CAL, body=body("prt00001", attendees=[{"email": "b@example.com"}])))
    fields = "nextSyncToken,items(id,start/date,attendees(email),extendedProperties/private)"
    page = api.run(api.events().list(calendarId=CAL, fields=fields))
    assert set(page) == {"nextSyncToken", "items"}
    only = {"id": "prt00001", "start": {"date": "2026-12-01"}, "attendees": [{"email": "b@example.com"}]}
    assert page["items"] == [only]
    whole = api.run(api.events().list(calendarId=CAL, fields="items/*,kind"))
    assert set(whole) == {"items", "kind"} and whole["items"][0]["summary"] == "x"


@pytest.mark.parametrize("fields", ["items(id,summry)", "items(id", "items/id/x", "nextPageToken(x)", "", "a,,b"])
def test_a_selection_google_refuses_is_400(api: Api, fields: str) -> None:
    exc = http_error(api.events().list(calendarId=CAL, fields=fields))
    assert (exc.resp.status, error_json(exc)["errors"][0]["reason"]) == (400, "invalidParameter")


def test_paths_and_groups_merge() -> None:
    assert parse("items(id,start/date),items/start/dateTime,items/id,kind") == {
        "items": {"id": None, "start": {"date": None, "dateTime": None}},
        "kind": None,
    }
    assert parse("a/b,a") == {"a": None}


@given(st.text(alphabet="ab*/(),_ ", max_size=20) | st.text(max_size=20))
def test_any_selection_text_parses_or_is_a_400(text: str) -> None:
    try:
        parse(text)
    except ApiError as exc:
        assert exc.status == 400

"""The emulator's incremental-sync surface: sync tokens, list filters, push channels, cancelled-event retention."""

from __future__ import annotations

import threading
import urllib.error
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from googleapiclient.errors import HttpError

from calsync_emulators.google.schema import conform, schema
from tests.providers.google.gcal_support import Api, Emulator
from tests.providers.google.test_google_emulator import body, error_json, http_error
from tests.support import wait_until

CAL = "alice@example.com"


def pages(api: Api, **query: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Every item of a listing, page by page, and the last page (which carries nextSyncToken)."""
    items: list[dict[str, Any]] = []
    token = None
    while True:
        page = api.run(api.events().list(calendarId=CAL, pageToken=token, **query))
        items.extend(page["items"])
        token = page.get("nextPageToken")
        if token is None:
            return items, page
        assert "nextSyncToken" not in page


def reason(exc: HttpError) -> tuple[int, str]:
    """Status and first reason of an error."""
    return exc.resp.status, error_json(exc)["errors"][0]["reason"]


# --- validation ------------------------------------------------------------------------------------


def test_unknown_fields_are_dropped_and_answers_carry_schema_fields_only(emulator: Emulator, api: Api) -> None:
    emulator.configure(strict=False)
    sent = body("unk00001", bogusField=1, attendee=[{"email": "b@example.com"}], start={"date": "2026-12-01", "x": 1})
    created = api.run(api.events().insert(calendarId=CAL, body=sent))
    assert "bogusField" not in created and "attendee" not in created and created["start"] == {"date": "2026-12-01"}
    listed = api.run(api.events().list(calendarId=CAL))
    assert conform(listed, schema("Events"), "", strict=True) == listed
    assert conform(created, schema("Event"), "", strict=True) == created


def test_strict_mode_refuses_an_unknown_field(emulator: Emulator, api: Api) -> None:
    exc = http_error(api.events().insert(calendarId=CAL, body=body("unk00002", attendee=[{"email": "b@x.com"}])))
    assert reason(exc) == (400, "invalid")
    assert "attendee" in error_json(exc)["message"]


@pytest.mark.parametrize(
    "fields",
    [{"extendedProperties": {"private": {"n": 1}}}, {"sequence": "3"}, {"attendees": {"email": "b@x.com"}}],
    ids=["integer-property", "string-sequence", "object-for-array"],
)
def test_wrong_types_are_400(api: Api, fields: dict[str, Any]) -> None:
    assert reason(http_error(api.events().insert(calendarId=CAL, body=body(**fields)))) == (400, "invalid")


def test_conference_data_and_attachments_need_their_parameters(api: Api) -> None:
    conference = {"conferenceId": "abc"}
    attachment = [{"fileUrl": "https://drive.google.com/x"}]
    fields = {"conferenceData": conference, "attachments": attachment}
    plain = api.run(api.events().insert(calendarId=CAL, body=body("cnf00001", **fields)))
    assert "conferenceData" not in plain and "attachments" not in plain
    opted = api.events().insert(
        calendarId=CAL, body=body("cnf00002", **fields), conferenceDataVersion=1, supportsAttachments=True
    )
    created = api.run(opted)
    assert (created["conferenceData"], created["attachments"]) == (conference, attachment)
    kept = api.run(api.events().update(calendarId=CAL, eventId="cnf00002", body=body(summary="y")))
    assert (kept["conferenceData"], kept["attachments"]) == (conference, attachment)


def test_sequence_grows_only_on_significant_changes(api: Api) -> None:
    api.run(api.events().insert(calendarId=CAL, body=body("seq00001")))
    retitled = api.run(api.events().update(calendarId=CAL, eventId="seq00001", body=body(summary="renamed")))
    same = api.run(api.events().update(calendarId=CAL, eventId="seq00001", body=body(summary="renamed")))
    moved = api.run(api.events().patch(calendarId=CAL, eventId="seq00001", body={"end": {"date": "2026-12-03"}}))
    assert [retitled["sequence"], same["sequence"], moved["sequence"]] == [0, 0, 1]
    assert same["etag"] != retitled["etag"]
    lower = http_error(api.events().patch(calendarId=CAL, eventId="seq00001", body={"sequence": 0}))
    assert reason(lower) == (400, "invalid")


def test_deleted_writes_forbidden_answers_403(emulator: Emulator, api: Api) -> None:
    emulator.configure(deleted_writes="forbidden")
    api.run(api.events().insert(calendarId=CAL, body=body("fbd00001")))
    api.run(api.events().delete(calendarId=CAL, eventId="fbd00001"))
    assert reason(http_error(api.events().update(calendarId=CAL, eventId="fbd00001", body=body()))) == (
        403,
        "forbidden",
    )
    assert reason(http_error(api.events().patch(calendarId=CAL, eventId="fbd00001", body={}))) == (403, "forbidden")


def test_config_is_checked_and_applied_all_or_none(emulator: Emulator) -> None:
    with pytest.raises(urllib.error.HTTPError) as caught:
        emulator.configure(strict=False, deleted_writes="sometimes")
    assert caught.value.code == 400
    assert emulator.control("GET", "config")["strict"] is True
    assert emulator.configure(calendar_time_zone="Europe/Berlin")["calendar_time_zone"] == "Europe/Berlin"
    emulator.reset()
    assert emulator.control("GET", "config")["calendar_time_zone"] == "UTC"


def test_error_styles(emulator: Emulator, api: Api) -> None:
    missing = error_json(http_error(api.events().get(calendarId=CAL, eventId="nope00001")))
    assert missing == {
        "code": 404,
        "message": "Not Found",
        "errors": [{"domain": "global", "reason": "notFound", "message": "Not Found"}],
    }
    emulator.configure(error_style="status")
    assert error_json(http_error(api.events().get(calendarId=CAL, eventId="nope00001")))["status"] == "NOT_FOUND"


# --- incremental sync ----------------------------------------------------------------------------


def test_sync_token_returns_exactly_what_changed(api: Api) -> None:
    for n in range(3):
        api.run(api.events().insert(calendarId=CAL, body=body(f"snc0000{n}")))
    api.run(api.events().delete(calendarId=CAL, eventId="snc00002"))
    full, last = pages(api, maxResults=2)
    assert [e["id"] for e in full] == ["snc00000", "snc00001"]

    api.run(api.events().insert(calendarId=CAL, body=body("snc00003")))
    api.run(api.events().patch(calendarId=CAL, eventId="snc00000", body={"summary": "changed"}))
    api.run(api.events().delete(calendarId=CAL, eventId="snc00001"))
    changed, then = pages(api, syncToken=last["nextSyncToken"], maxResults=2)
    assert sorted((e["id"], e["status"]) for e in changed) == [
        ("snc00000", "confirmed"),
        ("snc00001", "cancelled"),
        ("snc00003", "confirmed"),
    ]
    assert pages(api, syncToken=then["nextSyncToken"])[0] == []


def test_expired_or_garbage_sync_token_is_410_full_sync_required(emulator: Emulator, api: Api) -> None:
    token = api.run(api.events().list(calendarId=CAL))["nextSyncToken"]
    assert reason(http_error(api.events().list(calendarId=CAL, syncToken="garbage"))) == (410, "fullSyncRequired")
    assert reason(http_error(api.events().list(calendarId="bob@example.com", syncToken=token)))[0] == 410
    emulator.configure(sync_token_lifetime=0)
    exc = http_error(api.events().list(calendarId=CAL, syncToken=token))
    assert error_json(exc)["errors"][0] == {
        "domain": "calendar",
        "reason": "fullSyncRequired",
        "message": "Sync token is no longer valid, a full sync is required.",
        "locationType": "parameter",
        "location": "syncToken",
    }


@pytest.mark.parametrize(
    "extra",
    [
        {"timeMin": "2026-12-01T00:00:00Z"},
        {"updatedMin": "2026-12-01T00:00:00Z"},
        {"iCalUID": "x@google.com"},
        {"q": "x"},
        {"orderBy": "updated"},
        {"privateExtendedProperty": "k=v"},
        {"showDeleted": False},
    ],
    ids=lambda extra: next(iter(extra)),
)
def test_what_google_forbids_with_a_sync_token_is_400(api: Api, extra: dict[str, Any]) -> None:
    token = api.run(api.events().list(calendarId=CAL))["nextSyncToken"]
    assert reason(http_error(api.events().list(calendarId=CAL, syncToken=token, **extra))) == (400, "invalid")


def test_list_filters(api: Api) -> None:
    timed = {"start": {"dateTime": "2026-12-01T10:00:00Z"}, "end": {"dateTime": "2026-12-01T11:00:00Z"}}
    api.run(api.events().insert(calendarId=CAL, body={**body("flt00001", summary="Budget review"), **timed}))
    api.run(
        api.events().insert(
            calendarId=CAL,
            body=body("flt00002", description="lunch", start={"date": "2026-11-30"}, end={"date": "2026-12-01"}),
        )
    )
    api.run(api.events().insert(calendarId=CAL, body=body("flt00003")))
    api.run(api.events().delete(calendarId=CAL, eventId="flt00003"))

    def ids(**query: Any) -> list[str]:
        return [e["id"] for e in pages(api, **query)[0]]

    assert ids(timeMin="2026-12-01T10:30:00Z", timeMax="2026-12-01T12:00:00+01:00") == ["flt00001"]
    assert ids(timeMax="2026-12-01T10:00:00Z") == ["flt00002"]  # bounds are exclusive
    assert ids(iCalUID="flt00002@google.com") == ["flt00002"]
    assert ids(q="BUDGET") == ["flt00001"]
    assert ids(updatedMin="2000-01-01T00:00:00Z") == ["flt00001", "flt00002", "flt00003"]  # deleted included
    assert ids(orderBy="startTime", singleEvents=True) == ["flt00002", "flt00001"]
    assert ids(orderBy="updated", showDeleted=True) == ["flt00001", "flt00002", "flt00003"]
    empty = http_error(
        api.events().list(calendarId=CAL, timeMin="2026-12-02T00:00:00Z", timeMax="2026-12-01T00:00:00Z")
    )
    assert reason(empty) == (400, "timeRangeEmpty")
    assert reason(http_error(api.events().list(calendarId=CAL, orderBy="startTime")))[0] == 400
    assert reason(http_error(api.events().list(calendarId=CAL, timeMin="2026-12-01T00:00:00")))[0] == 400


# --- cancelled events ----------------------------------------------------------------------------


def test_cancelled_events_are_reduced_then_forgotten(emulator: Emulator, api: Api) -> None:
    api.run(api.events().insert(calendarId=CAL, body=body("ret00001", summary="secret")))
    token = api.run(api.events().list(calendarId=CAL))["nextSyncToken"]
    api.run(api.events().delete(calendarId=CAL, eventId="ret00001"))
    emulator.configure(cancelled_retention=0)
    stub = api.run(api.events().get(calendarId=CAL, eventId="ret00001"))
    assert set(stub) == {"kind", "etag", "id", "status", "updated"}
    assert stub["status"] == "cancelled"

    emulator.configure(cancelled_forget_after=0)
    assert http_error(api.events().get(calendarId=CAL, eventId="ret00001")).resp.status == 404
    assert reason(http_error(api.events().list(calendarId=CAL, syncToken=token))) == (410, "fullSyncRequired")
    old = http_error(api.events().list(calendarId=CAL, updatedMin="2000-01-01T00:00:00Z"))
    assert reason(old) == (410, "updatedMinTooLongAgo")
    assert api.run(api.events().insert(calendarId=CAL, body=body("ret00001")))["status"] == "confirmed"


# --- push notifications --------------------------------------------------------------------------


class Receiver:
    """A local web hook that records every notification's headers."""

    def __init__(self) -> None:
        received: list[dict[str, str]] = []
        self.received = received

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                assert self.rfile.read(length) == b""
                received.append({k: v for k, v in self.headers.items() if k.lower().startswith("x-goog-")})
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet."""

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def of(self, channel_id: str) -> list[dict[str, str]]:
        """The notifications of one channel, in arrival order."""
        return [r for r in self.received if r["X-Goog-Channel-ID"] == channel_id]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """A web hook for this test."""
    hook = Receiver()
    yield hook
    hook.server.shutdown()
    hook.server.server_close()


def watch(api: Api, address: str, **extra: Any) -> dict[str, Any]:
    """Open a channel on CAL's events."""
    channel = {"id": str(uuid.uuid4()), "type": "web_hook", "address": address, **extra}
    answer: dict[str, Any] = api.run(api.events().watch(calendarId=CAL, body=channel))
    return answer


def test_a_channel_gets_one_notification_per_change_until_stopped(api: Api, receiver: Receiver) -> None:
    channel = watch(api, receiver.url, token="tenant-1", params={"ttl": "3600"})
    assert channel["kind"] == "api#channel" and channel["resourceId"] and int(channel["expiration"]) > 0
    api.run(api.events().insert(calendarId=CAL, body=body("psh00001")))
    api.run(api.events().patch(calendarId=CAL, eventId="psh00001", body={"summary": "y"}))
    api.run(api.events().delete(calendarId=CAL, eventId="psh00001"))
    api.run(api.events().insert(calendarId="bob@example.com", body=body("psh00002")))  # another calendar

    wait_until(lambda: len(receiver.of(channel["id"])) >= 4, what="4 messages")
    got = receiver.of(channel["id"])
    assert [(m["X-Goog-Resource-State"], m["X-Goog-Message-Number"]) for m in got] == [
        ("sync", "1"),
        ("exists", "2"),
        ("exists", "3"),
        ("exists", "4"),
    ]
    assert {m["X-Goog-Channel-Token"] for m in got} == {"tenant-1"}
    assert {m["X-Goog-Resource-ID"] for m in got} == {channel["resourceId"]}
    assert {m["X-Goog-Resource-URI"] for m in got} == {channel["resourceUri"]}
    assert got[0]["X-Goog-Channel-Expiration"].endswith(" GMT")

    api.run(api.service.channels().stop(body={"id": channel["id"], "resourceId": channel["resourceId"]}))
    witness = watch(api, receiver.url)
    api.run(api.events().insert(calendarId=CAL, body=body("psh00003")))
    # Messages go out in order from one queue: once the witness saw the change, the stopped channel would have.
    wait_until(lambda: len(receiver.of(witness["id"])) == 2, what="the witness's exists")
    assert len(receiver.of(channel["id"])) == 4
    gone = http_error(api.service.channels().stop(body={"id": channel["id"], "resourceId": channel["resourceId"]}))
    assert gone.resp.status == 404


def test_watch_refuses_a_reused_channel_id(api: Api, receiver: Receiver) -> None:
    channel = watch(api, receiver.url)
    again = {"id": channel["id"], "type": "web_hook", "address": receiver.url}
    assert reason(http_error(api.events().watch(calendarId=CAL, body=again))) == (400, "channelIdNotUnique")

"""The emulator speaks Calendar v3 and OAuth the way the real client library expects."""

from __future__ import annotations

import re

import google_auth_httplib2
import httplib2
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from google.auth.exceptions import RefreshError
from google.oauth2 import service_account

from calsync.providers.google.credentials import SCOPES
from calsync_emulators.google import create_app
from calsync_emulators.server import EmulatorApp
from tests.providers.google.gcal_support import CAL, Api, Emulator, body, error_json, http_error, raw


def test_create_app_is_an_emulator_app() -> None:
    assert isinstance(create_app(), EmulatorApp)


def test_client_ids_must_be_base32hex(api: Api) -> None:
    created = api.run(api.events().insert(calendarId=CAL, body=body("abcdev01234")))
    assert created["id"] == "abcdev01234"
    assert created["iCalUID"] == "abcdev01234@google.com"
    assert re.fullmatch(r'"\d+"', created["etag"])
    for bad in ("ABCDEF12345", "abcd", "abc-def-123", "wxyz12345"):
        exc = http_error(api.events().insert(calendarId=CAL, body=body(bad)))
        assert exc.resp.status == 400
        assert error_json(exc) == {
            "code": 400,
            "message": "Invalid resource id value.",
            "errors": [{"domain": "global", "reason": "invalid", "message": "Invalid resource id value."}],
        }


def test_server_generates_ids_in_the_same_alphabet(api: Api) -> None:
    created = api.run(api.events().insert(calendarId=CAL, body=body()))
    assert re.fullmatch(r"[a-v0-9]{5,1024}", created["id"])


def test_duplicate_id_is_409_even_when_cancelled(api: Api) -> None:
    api.run(api.events().insert(calendarId=CAL, body=body("dup00001")))
    exc = http_error(api.events().insert(calendarId=CAL, body=body("dup00001")))
    assert exc.resp.status == 409
    assert error_json(exc)["errors"][0]["reason"] == "duplicate"
    api.run(api.events().delete(calendarId=CAL, eventId="dup00001"))
    assert http_error(api.events().insert(calendarId=CAL, body=body("dup00001"))).resp.status == 409


def test_delete_cancels_then_410_and_unknown_is_404(api: Api) -> None:
    api.run(api.events().insert(calendarId=CAL, body=body("del00001")))
    assert api.run(api.events().delete(calendarId=CAL, eventId="del00001")) == ""
    kept = api.run(api.events().get(calendarId=CAL, eventId="del00001"))
    assert kept["status"] == "cancelled"
    gone = http_error(api.events().delete(calendarId=CAL, eventId="del00001"))
    assert (gone.resp.status, error_json(gone)["errors"][0]["reason"]) == (410, "deleted")
    missing = http_error(api.events().delete(calendarId=CAL, eventId="never0001"))
    assert (missing.resp.status, error_json(missing)["errors"][0]["reason"]) == (404, "notFound")
    assert http_error(api.events().get(calendarId=CAL, eventId="never0001")).resp.status == 404


def test_update_restores_a_cancelled_event(api: Api) -> None:
    api.run(api.events().insert(calendarId=CAL, body=body("res00001")))
    api.run(api.events().delete(calendarId=CAL, eventId="res00001"))
    restored = api.run(api.events().update(calendarId=CAL, eventId="res00001", body=body(summary="back")))
    # The delete and the restore both change STATUS, which iCalendar's SEQUENCE tracks.
    assert (restored["status"], restored["summary"], restored["sequence"]) == ("confirmed", "back", 2)


def test_if_match_and_if_none_match(api: Api) -> None:
    created = api.run(api.events().insert(calendarId=CAL, body=body("etag0001")))
    changed = api.run(api.events().patch(calendarId=CAL, eventId="etag0001", body={"summary": "y"}))
    assert changed["etag"] != created["etag"]

    stale = api.events().update(calendarId=CAL, eventId="etag0001", body=body(summary="z"))
    stale.headers["If-Match"] = created["etag"]
    exc = http_error(stale)
    assert exc.resp.status == 412
    assert error_json(exc)["errors"][0] == {
        "domain": "global",
        "reason": "conditionNotMet",
        "message": "Precondition Failed",
        "locationType": "header",
        "location": "If-Match",
    }
    fresh = api.events().update(calendarId=CAL, eventId="etag0001", body=body(summary="z"))
    fresh.headers["If-Match"] = changed["etag"]
    assert api.run(fresh)["summary"] == "z"

    cached = api.events().get(calendarId=CAL, eventId="etag0001")
    cached.headers["If-None-Match"] = api.run(api.events().get(calendarId=CAL, eventId="etag0001"))["etag"]
    assert http_error(cached).resp.status == 304


def test_patch_merges_and_null_removes(api: Api) -> None:
    api.run(
        api.events().insert(
            calendarId=CAL, body=body("pat00001", extendedProperties={"private": {"a": "1", "b": "2"}}, location="L")
        )
    )
    patched = api.run(
        api.events().patch(
            calendarId=CAL,
            eventId="pat00001",
            body={"location": None, "extendedProperties": {"private": {"b": None, "c": "3"}}},
        )
    )
    assert "location" not in patched
    assert patched["extendedProperties"]["private"] == {"a": "1", "c": "3"}


@pytest.mark.parametrize(
    ("start", "end", "reason"),
    [
        ({"dateTime": "2026-12-01T10:00:00"}, {"dateTime": "2026-12-01T11:00:00"}, "required"),
        ({"dateTime": "2026-12-01T10:00:00Z"}, {"dateTime": "2026-12-01T09:00:00Z"}, "timeRangeEmpty"),
        ({"date": "2026-12-01"}, {"dateTime": "2026-12-01T09:00:00Z"}, "invalid"),
        ({"dateTime": "2026-12-01T10:00:00", "timeZone": "Mars/Olympus"}, {"date": "2026-12-02"}, "invalid"),
    ],
)
def test_invalid_times_are_400(api: Api, start: dict[str, str], end: dict[str, str], reason: str) -> None:
    exc = http_error(api.events().insert(calendarId=CAL, body={"start": start, "end": end}))
    assert (exc.resp.status, error_json(exc)["errors"][0]["reason"]) == (400, reason)


def test_times_come_back_in_the_event_s_or_the_requested_time_zone(api: Api) -> None:
    when = {"dateTime": "2026-12-01T10:00:00", "timeZone": "Europe/Berlin"}
    until = {"dateTime": "2026-12-01T11:00:00Z"}
    created = api.run(api.events().insert(calendarId=CAL, body={"id": "tim00001", "start": when, "end": until}))
    # The end has no zone of its own: the calendar's (UTC) is used.
    assert (created["start"], created["end"]) == (
        {"dateTime": "2026-12-01T10:00:00+01:00", "timeZone": "Europe/Berlin"},
        {"dateTime": "2026-12-01T11:00:00Z"},
    )
    tokyo = api.run(api.events().get(calendarId=CAL, eventId="tim00001", timeZone="Asia/Tokyo"))
    assert (tokyo["start"]["dateTime"], tokyo["end"]["dateTime"]) == (
        "2026-12-01T18:00:00+09:00",
        "2026-12-01T20:00:00+09:00",
    )
    listed = api.run(api.events().list(calendarId=CAL, timeZone="America/New_York"))
    assert (listed["timeZone"], listed["items"][0]["start"]["dateTime"]) == (
        "America/New_York",
        "2026-12-01T04:00:00-05:00",
    )


def test_percent_encoded_calendar_ids(api: Api, emulator: Emulator) -> None:
    odd = "team/room+1@example.com"
    api.run(api.events().insert(calendarId=odd, body=body("pct00001")))
    assert [e["id"] for e in api.list_all(odd)] == ["pct00001"]
    assert api.list_all("team") == []
    assert api.run(api.events().get(calendarId=odd, eventId="pct00001"))["organizer"]["email"] == odd
    assert emulator.requests()[1]["path"] == f"/calendar/v3/calendars/{odd}/events"


def test_listing_hides_cancelled_unless_show_deleted(api: Api) -> None:
    for n in range(5):
        api.run(api.events().insert(calendarId=CAL, body=body(f"lst0000{n}")))
    api.run(api.events().delete(calendarId=CAL, eventId="lst00000"))
    visible = api.run(api.events().list(calendarId=CAL))["items"]
    assert [e["id"] for e in visible] == ["lst00001", "lst00002", "lst00003", "lst00004"]
    everything = api.list_all(CAL)
    assert [(e["id"], e["status"]) for e in everything][:2] == [("lst00000", "cancelled"), ("lst00001", "confirmed")]
    assert len(everything) == 5


def test_listing_pages(api: Api) -> None:
    for n in range(5):
        api.run(api.events().insert(calendarId=CAL, body=body(f"pag0000{n}")))
    first = api.run(api.events().list(calendarId=CAL, maxResults=2))
    assert [e["id"] for e in first["items"]] == ["pag00000", "pag00001"]
    rest = api.run(api.events().list(calendarId=CAL, maxResults=2, pageToken=first["nextPageToken"]))
    assert [e["id"] for e in rest["items"]] == ["pag00002", "pag00003"]
    last = api.run(api.events().list(calendarId=CAL, maxResults=2, pageToken=rest["nextPageToken"]))
    assert [e["id"] for e in last["items"]] == ["pag00004"]
    assert "nextPageToken" not in last


def test_private_extended_property_filter(api: Api) -> None:
    api.run(api.events().insert(calendarId=CAL, body=body("prp00001", extendedProperties={"private": {"k": "1"}})))
    api.run(api.events().insert(calendarId=CAL, body=body("prp00002", extendedProperties={"private": {"k": "2"}})))
    found = api.run(api.events().list(calendarId=CAL, privateExtendedProperty="k=2"))["items"]
    assert [e["id"] for e in found] == ["prp00002"]


def test_api_calls_need_a_live_token(emulator: Emulator) -> None:
    status, payload = raw(emulator, "GET", f"/calendar/v3/calendars/{CAL}/events")
    assert status == 401
    assert payload["error"]["errors"][0]["reason"] == "authError"
    status, grant = raw(emulator, "POST", "/token", form="grant_type=refresh_token&refresh_token=r1&client_id=c")
    assert (status, grant["token_type"], grant["expires_in"]) == (200, "Bearer", 3599)
    assert raw(emulator, "GET", f"/calendar/v3/calendars/{CAL}/events", grant["access_token"])[0] == 200
    assert emulator.control("POST", "tokens/expire") == {"expired": 1}
    status, payload = raw(emulator, "GET", f"/calendar/v3/calendars/{CAL}/events", grant["access_token"])
    assert (status, payload["error"]["errors"][0]["reason"]) == (401, "authError")


def test_token_lifetime_is_configurable(emulator: Emulator, api: Api) -> None:
    assert emulator.control("POST", "config", {"token_lifetime": 0})["token_lifetime"] == 0
    # Every token is dead on arrival: AuthorizedHttp retries twice with fresh ones, then lets the 401 through.
    assert http_error(api.events().list(calendarId=CAL)).resp.status == 401
    assert [c for c in emulator.calls() if c[1] == "events"] == [("GET", "events", 401)] * 3
    emulator.reset()
    assert emulator.control("GET", "config")["token_lifetime"] == 3599


def test_revoked_refresh_token_answers_invalid_grant(emulator: Emulator, api: Api) -> None:
    api.run(api.events().list(calendarId=CAL))
    assert emulator.control("POST", "revoke", {"refresh_token": "1//inspector"}) == {"revoked": True}
    with pytest.raises(RefreshError) as caught:
        api.run(api.events().list(calendarId=CAL))
    assert caught.value.args[1]["error"] == "invalid_grant"
    assert [c[2] for c in emulator.calls()] == [200, 200, 401, 400]
    other = raw(emulator, "POST", "/token", form="grant_type=refresh_token&refresh_token=other&client_id=any")
    assert other[0] == 200


def test_service_account_jwt_grant(emulator: Emulator) -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    info = {
        "type": "service_account",
        "client_email": "robot@project.iam.gserviceaccount.com",
        "private_key": pem.decode(),
        "private_key_id": "k1",
        "token_uri": emulator.token_uri,
    }
    creds = service_account.Credentials.from_service_account_info(info, scopes=list(SCOPES)).with_subject(CAL)
    creds.refresh(google_auth_httplib2.Request(httplib2.Http(timeout=10)))
    assert creds.token.startswith("ya29.emu-")
    assert emulator.requests()[-1] == {
        "method": "POST",
        "path": "/token",
        "status": 200,
        "grant": "jwt-bearer",
        "subject": CAL,
        "scope": SCOPES[0],
    }
    emulator.control("POST", "revoke", {"client_email": info["client_email"]})
    with pytest.raises(RefreshError) as caught:
        creds.refresh(google_auth_httplib2.Request(httplib2.Http(timeout=10)))
    assert caught.value.args[1]["error"] == "invalid_grant"


def test_malformed_assertion_is_invalid_grant(emulator: Emulator) -> None:
    form = "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=not.a.jwt"
    status, payload = raw(emulator, "POST", "/token", form=form)
    assert (status, payload["error"]) == (400, "invalid_grant")
    assert raw(emulator, "POST", "/token", form="grant_type=password")[1]["error"] == "unsupported_grant_type"


def test_request_log_and_reset(emulator: Emulator, api: Api) -> None:
    api.run(api.events().insert(calendarId=CAL, body=body("log00001"), sendUpdates="externalOnly"))
    api.run(api.events().delete(calendarId=CAL, eventId="log00001", sendUpdates="all"))
    assert emulator.requests() == [
        {
            "method": "POST",
            "path": "/token",
            "status": 200,
            "grant": "refresh_token",
            "subject": None,
            "scope": SCOPES[0],
        },
        {
            "method": "POST",
            "path": f"/calendar/v3/calendars/{CAL}/events",
            "status": 200,
            "send_updates": "externalOnly",
        },
        {
            "method": "DELETE",
            "path": f"/calendar/v3/calendars/{CAL}/events/log00001",
            "status": 204,
            "send_updates": "all",
        },
    ]
    emulator.fault(status=500)
    emulator.reset()
    assert emulator.requests() == []
    assert emulator.control("GET", "faults") == []

"""The emulator's fault rules (count-down, matching, seeded probability, drops, delays, body styles), as the
real client library sees them."""

from __future__ import annotations

import http.client
import urllib.error
import urllib.request

import pytest

from calsync_emulators.google import create_app
from calsync_emulators.server import RunningEmulator
from tests.providers.google.gcal_support import CAL, Api, Emulator, body, error_json, http_error, raw


def test_fault_times_counts_down(emulator: Emulator, api: Api) -> None:
    emulator.fault(method="GET", path=r"/events$", status=503, times=2)
    assert http_error(api.events().list(calendarId=CAL)).resp.status == 503
    assert http_error(api.events().list(calendarId=CAL)).resp.status == 503
    assert api.run(api.events().list(calendarId=CAL))["items"] == []
    assert emulator.control("GET", "faults") == []


def test_fault_matches_the_query_and_pages_obey_the_page_limit(emulator: Emulator, api: Api) -> None:
    for n in range(3):
        api.run(api.events().insert(calendarId=CAL, body=body(f"pag0000{n}")))
    emulator.configure(page_limit=2)
    emulator.fault(method="GET", path=r"/events$", query="pageToken=", status=503)
    first = api.run(api.events().list(calendarId=CAL, maxResults=2500))
    assert len(first["items"]) == 2 and "nextSyncToken" not in first
    assert http_error(api.events().list(calendarId=CAL, pageToken=first["nextPageToken"])).resp.status == 503


def test_fault_matches_method_and_path(emulator: Emulator, api: Api) -> None:
    emulator.fault(method="POST", path=r"/calendars/bob@example\.com/", status=500)
    api.run(api.events().insert(calendarId=CAL, body=body("mat00001")))
    assert api.run(api.events().list(calendarId="bob@example.com"))["items"] == []
    assert http_error(api.events().insert(calendarId="bob@example.com", body=body())).resp.status == 500


def _coin_tosses(seed: int) -> list[int]:
    with RunningEmulator(create_app(seed=seed)) as running:
        emulator = Emulator(running)
        emulator.fault(method="GET", status=503, probability=0.5)
        return [raw(emulator, "GET", f"/calendar/v3/calendars/{CAL}/events")[0] for _ in range(30)]


def test_fault_probability_is_reproducible_with_a_seed() -> None:
    first, second = _coin_tosses(11), _coin_tosses(11)
    assert first == second
    assert set(first) == {401, 503}  # spared calls reach the API (401: no token), the others get the 503


def test_fault_after_applies_the_request_then_breaks_it(emulator: Emulator, api: Api) -> None:
    emulator.fault(method="POST", path=r"/events$", status=503, after=True, times=1)
    assert http_error(api.events().insert(calendarId=CAL, body=body("aft00001"))).resp.status == 503
    assert [e["id"] for e in api.list_all(CAL)] == ["aft00001"]


def test_fault_drop_closes_without_answer(emulator: Emulator, api: Api) -> None:
    emulator.fault(method="POST", path=r"/events$", drop=True, after=True)
    with pytest.raises(http.client.RemoteDisconnected):
        api.run(api.events().insert(calendarId=CAL, body=body("drp00001")))
    # httplib2 re-sends once on a dropped connection (docs/notes/emulators.md); the second attempt found the id taken.
    assert emulator.calls()[1:] == [("POST", "events", None), ("POST", "events", None)]
    assert [e["id"] for e in api.list_all(CAL)] == ["drp00001"]


def test_fault_retry_after_and_reason(emulator: Emulator, api: Api) -> None:
    emulator.fault(path="/events$", status=429, retry_after=7)
    exc = http_error(api.events().list(calendarId=CAL))
    assert exc.resp.get("retry-after") == "7"
    assert error_json(exc) == {
        "code": 429,
        "message": "Rate Limit Exceeded",
        "errors": [{"domain": "usageLimits", "reason": "rateLimitExceeded", "message": "Rate Limit Exceeded"}],
    }


def test_fault_body_styles(emulator: Emulator, api: Api) -> None:
    emulator.fault(path="/events$", status=403, reason="userRateLimitExceeded", style="details", times=1)
    detailed = http_error(api.events().list(calendarId=CAL))
    # With "details" present the client's error_details switches to them (docs/notes/emulators.md).
    assert detailed.error_details[0]["reason"] == "USER_RATE_LIMIT_EXCEEDED"
    assert error_json(detailed)["errors"][0]["reason"] == "userRateLimitExceeded"

    scopes = "Request had insufficient authentication scopes."
    emulator.fault(path="/events$", status=403, message=scopes, style="status_only", times=1)
    bare = error_json(http_error(api.events().list(calendarId=CAL)))
    assert bare == {
        "code": 403,
        "message": "Request had insufficient authentication scopes.",
        "status": "PERMISSION_DENIED",
    }

    emulator.fault(path="/events$", status=502, style="html", times=1)
    page = http_error(api.events().list(calendarId=CAL))
    assert page.resp["content-type"].startswith("text/html")
    assert page.reason == "Bad Gateway"


def test_fault_on_token_endpoint_uses_oauth_shape(emulator: Emulator) -> None:
    emulator.fault(path="^/token$", status=401, reason="invalid_client", message="The OAuth client was not found.")
    status, payload = raw(emulator, "POST", "/token", form="grant_type=refresh_token&refresh_token=r")
    assert (status, payload) == (
        401,
        {"error": "invalid_client", "error_description": "The OAuth client was not found."},
    )


def test_fault_delay_outlasts_a_client_timeout(private_emulator: Emulator) -> None:
    private_emulator.fault(method="GET", delay_ms=2000, status=503)
    connection = http.client.HTTPConnection(private_emulator.url.removeprefix("http://"), timeout=0.3)
    with pytest.raises(TimeoutError):
        connection.request("GET", f"/calendar/v3/calendars/{CAL}/events", headers={"Authorization": "Bearer x"})
        connection.getresponse()
    connection.close()


def test_bad_fault_spec_is_400(emulator: Emulator) -> None:
    with pytest.raises(urllib.error.HTTPError) as caught:
        emulator.fault(status=503, style="comic-sans")
    assert caught.value.code == 400

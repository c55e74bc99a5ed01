"""The Graph emulator's calendarView delta over https with httpx: rounds, pages, @removed, 410s, what it refuses."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from calsync.core.model.markers import GRAPH_SYNC_KEY_PROPERTY_ID
from calsync_emulators.control import GraphControl
from calsync_emulators.graph.tls import TlsIdentity

WINDOW = {"startDateTime": "2030-01-01T00:00:00Z", "endDateTime": "2030-02-01T00:00:00Z"}


def _event(subject: str, day: int = 2, month: int = 1) -> dict[str, Any]:
    when = f"2030-{month:02d}-{day:02d}"
    marker = {"id": GRAPH_SYNC_KEY_PROPERTY_ID, "value": f"key-{subject}"}
    return {
        "subject": subject,
        "start": {"dateTime": f"{when}T10:00:00", "timeZone": "UTC"},
        "end": {"dateTime": f"{when}T11:00:00", "timeZone": "UTC"},
        "singleValueExtendedProperties": [marker],
    }


@pytest.fixture
def http(emulator_tls: TlsIdentity, graph: GraphControl) -> Iterator[httpx.Client]:
    """An httpx client trusting the emulator's certificate, with an app-only token."""
    with httpx.Client(verify=ssl.create_default_context(cafile=str(emulator_tls.ca_file)), timeout=10) as client:
        form = {"grant_type": "client_credentials", "client_id": "calsync-client", "client_secret": "client-secret",
                "scope": "https://graph.microsoft.com/.default"}  # fmt: skip
        token = client.post(f"{graph.https_url}/example-tenant/oauth2/v2.0/token", data=form).json()["access_token"]
        client.headers["Authorization"] = f"Bearer {token}"
        yield client


def _create(http: httpx.Client, graph: GraphControl, body: dict[str, Any]) -> str:
    answer = http.post(f"{graph.api_endpoint}users/alpha@example.com/calendar/events", json=body)
    assert answer.status_code == 201
    return str(answer.json()["id"])


def _round(http: httpx.Client, url: str, params: dict[str, str] | None = None, page: int | None = None
           ) -> tuple[list[dict[str, Any]], str, int]:  # fmt: skip
    """A whole delta round: its items, the deltaLink and how many pages it took."""
    headers = {} if page is None else {"Prefer": f"odata.maxpagesize={page}"}
    items, pages = [], 0
    while True:
        answer = http.get(url, params=params, headers=headers)
        assert answer.status_code == 200, answer.text
        if page is not None:
            assert answer.headers["Preference-Applied"] == f"odata.maxpagesize={page}"
        body, pages, params = answer.json(), pages + 1, None
        assert not ("@odata.nextLink" in body and "@odata.deltaLink" in body)
        items += body["value"]
        if "@odata.deltaLink" in body:
            return items, body["@odata.deltaLink"], pages
        url = body["@odata.nextLink"]


def _delta(graph: GraphControl) -> str:
    return f"{graph.api_endpoint}users/alpha@example.com/calendarView/delta"


def test_a_first_round_lists_the_window_in_pages_and_later_rounds_the_changes(
    http: httpx.Client, graph: GraphControl
) -> None:
    ids = [_create(http, graph, _event(f"E{n}", day=2 + n)) for n in range(5)]
    outside = _create(http, graph, _event("Later", month=3))
    items, link, pages = _round(http, _delta(graph), WINDOW, page=2)
    assert ([i["id"] for i in items], pages) == (ids, 3)
    assert "singleValueExtendedProperties" not in items[0] and items[0]["subject"] == "E0"

    graph.edit_item(ids[0], subject="Edited by the user")
    graph.delete_item(ids[1])
    http.patch(f"{graph.api_endpoint}users/alpha@example.com/events/{ids[2]}", json=_event("Moved", month=4))
    http.patch(f"{graph.api_endpoint}users/alpha@example.com/events/{outside}", json={"subject": "Still later"})
    changes, newer, _ = _round(http, link)
    assert [(i["id"], i.get("subject"), i.get("@removed")) for i in changes] == [
        (ids[0], "Edited by the user", None), (ids[1], None, {"reason": "deleted"}),
        (ids[2], None, {"reason": "deleted"}), (outside, None, {"reason": "deleted"})]  # fmt: skip
    assert _round(http, newer) == ([], newer, 1)  # unchanged: one page, the same deltaLink


def test_an_event_changed_while_a_round_pages_is_not_lost(http: httpx.Client, graph: GraphControl) -> None:
    ids = [_create(http, graph, _event(f"E{n}", day=2 + n)) for n in range(3)]
    first = http.get(_delta(graph), params=WINDOW, headers={"Prefer": "odata.maxpagesize=1"}).json()
    graph.edit_item(ids[1], subject="Edited mid-round")
    rest, link, _ = _round(http, first["@odata.nextLink"], page=1)
    assert [i["id"] for i in first["value"] + rest] == [ids[0], ids[2]]
    changes, _, _ = _round(http, link)
    assert [(i["id"], i["subject"]) for i in changes] == [(ids[1], "Edited mid-round")]


def test_changes_made_over_ews_show_in_the_delta(http: httpx.Client, graph: GraphControl) -> None:
    event_id = _create(http, graph, _event("E"))
    _, link, _ = _round(http, _delta(graph), WINDOW)
    [item] = graph.items("alpha@example.com")
    graph.control("PATCH", f"items/{item['ews_id']}", {"location": "Room 9"})  # the EWS front's own route
    [changed] = _round(http, link)[0]
    assert (changed["id"], changed["location"]["displayName"]) == (event_id, "Room 9")


def test_expired_and_unknown_tokens_answer_410_and_unsupported_queries_400(
    http: httpx.Client, graph: GraphControl
) -> None:
    _create(http, graph, _event("E"))
    _, link, _ = _round(http, _delta(graph), WINDOW)
    graph.expire_sync_states()
    expired = http.get(link)
    assert (expired.status_code, expired.json()["error"]["code"]) == (410, "SyncStateNotFound")
    assert expired.headers["Location"].startswith(_delta(graph) + "?startDateTime=")
    restarted, _, _ = _round(http, expired.headers["Location"])
    assert [i["subject"] for i in restarted] == ["E"]
    unknown = http.get(_delta(graph), params={"$deltatoken": "not-a-token"})
    assert (unknown.status_code, unknown.json()["error"]["code"]) == (410, "resyncRequired")
    for query in ({"$expand": "singleValueExtendedProperties"}, {"$select": "subject"}, {"$filter": "x"}):
        assert http.get(_delta(graph), params={**WINDOW, **query}).status_code == 400
    assert http.get(_delta(graph), params={"startDateTime": WINDOW["startDateTime"]}).status_code == 400
    ops = [r.get("operation") for r in graph.requests() if r["path"].endswith("/delta")]
    assert set(ops) == {"events.delta"}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(token=st.text(max_size=120))
def test_any_token_text_is_answered_never_a_server_error(http: httpx.Client, graph: GraphControl, token: str) -> None:
    for name in ("$deltatoken", "$skiptoken"):
        answer = http.get(_delta(graph), params={name: token})
        assert answer.status_code in (200, 410), answer.text

"""The Graph emulator's wire contract, over https with httpx: Entra, events, filters, etags, errors, one store."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from calsync.core.model.markers import GRAPH_SYNC_KEY_PROPERTY_ID, SYNC_KEY_PROPERTY_SET
from calsync_emulators.control import GraphControl
from calsync_emulators.graph.tls import TlsIdentity

EVENT = {
    "subject": "Planning",
    "start": {"dateTime": "2030-01-02T10:00:00", "timeZone": "Europe/Copenhagen"},
    "end": {"dateTime": "2030-01-02T11:00:00", "timeZone": "Europe/Copenhagen"},
    "attendees": [{"emailAddress": {"address": "bob@example.com"}, "type": "required"}],
    "singleValueExtendedProperties": [{"id": GRAPH_SYNC_KEY_PROPERTY_ID, "value": "t1:Evt:acct"}],
}


@pytest.fixture
def http(emulator_tls: TlsIdentity) -> Iterator[httpx.Client]:
    """An httpx client trusting the emulator's certificate."""
    with httpx.Client(verify=ssl.create_default_context(cafile=str(emulator_tls.ca_file)), timeout=10) as client:
        yield client


def token(http: httpx.Client, graph: GraphControl, **form: str) -> httpx.Response:
    """A token request to the emulator's Entra."""
    data = {"grant_type": "client_credentials", "client_id": "calsync-client", "client_secret": "client-secret",
            "scope": "https://graph.microsoft.com/.default", **form}  # fmt: skip
    return http.post(f"{graph.https_url}/example-tenant/oauth2/v2.0/token", data=data)


@pytest.fixture
def bearer(http: httpx.Client, graph: GraphControl) -> dict[str, str]:
    """Authorization header of an app-only token."""
    return {"Authorization": f"Bearer {token(http, graph).json()['access_token']}"}


def events_url(graph: GraphControl, mailbox: str = "alpha@example.com") -> str:
    """The primary calendar's events collection."""
    return f"{graph.api_endpoint}users/{mailbox}/calendar/events"


def test_discovery_and_entra_errors_in_entras_shape(http: httpx.Client, graph: GraphControl) -> None:
    config = http.get(f"{graph.https_url}/example-tenant/v2.0/.well-known/openid-configuration").json()
    assert config["token_endpoint"] == f"{graph.https_url}/example-tenant/oauth2/v2.0/token"
    wrong = token(http, graph, client_secret="nope")
    assert wrong.status_code == 401 and wrong.json()["error"] == "invalid_client"
    assert wrong.json()["error_codes"] == [7000215] and wrong.json()["error_description"].startswith("AADSTS7000215:")
    unknown = token(http, graph, client_id="ghost")
    assert (unknown.status_code, unknown.json()["error_codes"]) == (400, [700016])
    graph.expire_secret()
    assert token(http, graph).json()["error_codes"] == [7000222]


def test_refresh_tokens_rotate_and_revocation_answers_invalid_grant(http: httpx.Client, graph: GraphControl) -> None:
    refresh = graph.user_credentials("alpha@example.com")["refresh_token"]
    first = token(http, graph, grant_type="refresh_token", refresh_token=refresh).json()
    assert first["refresh_token"] != refresh
    graph.revoke_user("alpha@example.com", code=700082)
    again = token(http, graph, grant_type="refresh_token", refresh_token=first["refresh_token"])
    assert (again.status_code, again.json()["error"], again.json()["error_codes"]) == (400, "invalid_grant", [700082])
    api = http.get(events_url(graph), headers={"Authorization": f"Bearer {first['access_token']}"})
    assert api.status_code == 401 and api.json()["error"]["code"] == "InvalidAuthenticationToken"


def test_events_crud_with_etags_and_graphs_error_body(
    http: httpx.Client, graph: GraphControl, bearer: dict[str, str]
) -> None:
    created = http.post(events_url(graph), json=EVENT, headers=bearer)
    assert created.status_code == 201
    event = created.json()
    assert event["@odata.etag"] == f'W/"{event["changeKey"]}"'
    assert event["start"] == {"dateTime": "2030-01-02T09:00:00.0000000", "timeZone": "UTC"}
    item = f"{graph.api_endpoint}users/alpha@example.com/events/{event['id']}"
    stale = http.patch(item, json={"subject": "x"}, headers={**bearer, "If-Match": 'W/"old"'})
    assert stale.status_code == 412
    assert set(stale.json()["error"]) == {"code", "message", "innerError"}
    patched = http.patch(item, json={"subject": "New"}, headers={**bearer, "If-Match": event["@odata.etag"]})
    assert patched.status_code == 200 and patched.json()["@odata.etag"] != event["@odata.etag"]
    assert http.delete(item, headers=bearer).status_code == 204
    gone = http.delete(item, headers=bearer)
    assert (gone.status_code, gone.json()["error"]["code"]) == (404, "ErrorItemNotFound")


def test_the_marker_filter_matches_the_name_case_sensitively_and_the_value_case_insensitively(
    http: httpx.Client, graph: GraphControl, bearer: dict[str, str]
) -> None:
    http.post(events_url(graph), json=EVENT, headers=bearer)

    def find(prop_id: str, value: str, **extra: str) -> list[dict[str, Any]]:
        where = f"singleValueExtendedProperties/Any(ep: ep/id eq '{prop_id}' and ep/value eq '{value}')"
        answer = http.get(f"{graph.api_endpoint}users/alpha@example.com/events",
                          params={"$filter": where, **extra}, headers=bearer)  # fmt: skip
        assert answer.status_code == 200, answer.text
        found: list[dict[str, Any]] = answer.json()["value"]
        return found

    assert len(find(GRAPH_SYNC_KEY_PROPERTY_ID, "t1:Evt:acct")) == 1
    assert len(find(GRAPH_SYNC_KEY_PROPERTY_ID, "T1:EVT:ACCT")) == 1
    assert find(GRAPH_SYNC_KEY_PROPERTY_ID.replace("CalsyncSyncKey", "calsyncsynckey"), "t1:Evt:acct") == []
    upper = f"String {{{SYNC_KEY_PROPERTY_SET.upper()}}} Name CalsyncSyncKey"
    assert len(find(upper, "t1:Evt:acct")) == 1
    [listed] = find(GRAPH_SYNC_KEY_PROPERTY_ID, "t1:Evt:acct")
    assert "singleValueExtendedProperties" not in listed
    expand = f"singleValueExtendedProperties($filter=id eq '{GRAPH_SYNC_KEY_PROPERTY_ID}')"
    [expanded] = find(GRAPH_SYNC_KEY_PROPERTY_ID, "t1:Evt:acct", **{"$expand": expand})
    assert expanded["singleValueExtendedProperties"] == [{"id": GRAPH_SYNC_KEY_PROPERTY_ID, "value": "t1:Evt:acct"}]


def test_transaction_id_replay_and_reuse(http: httpx.Client, graph: GraphControl, bearer: dict[str, str]) -> None:
    body = {**EVENT, "transactionId": "tx-1"}
    first = http.post(events_url(graph), json=body, headers=bearer)
    replay = http.post(events_url(graph), json=body, headers=bearer)
    assert (first.status_code, replay.status_code) == (201, 201) and first.json()["id"] == replay.json()["id"]
    reused = http.post(events_url(graph), json={**body, "subject": "Other"}, headers=bearer)
    assert (reused.status_code, reused.json()["error"]["code"]) == (400, "ErrorDuplicateTransactionId")
    assert len(graph.items()) == 1


def test_a_transaction_id_is_per_mailbox_and_freed_with_its_event(
    http: httpx.Client, graph: GraphControl, bearer: dict[str, str]
) -> None:
    body = {**EVENT, "transactionId": "tx-1"}
    first = http.post(events_url(graph), json=body, headers=bearer).json()
    elsewhere = http.post(events_url(graph, "beta@example.com"), json=body, headers=bearer).json()
    assert first["id"] != elsewhere["id"]
    graph.delete_item(first["id"])
    again = http.post(events_url(graph), json={**body, "subject": "Other"}, headers=bearer)
    assert again.status_code == 201 and again.json()["id"] != first["id"]  # the gone event's id is free
    replay = http.post(events_url(graph), json={**body, "subject": "Other"}, headers=bearer)
    assert replay.json()["id"] == again.json()["id"]
    assert len(graph.items("alpha@example.com")) == 1 and len(graph.items("beta@example.com")) == 1


def test_requests_over_the_mailbox_concurrency_limit_are_throttled_and_counted(
    http: httpx.Client, graph: GraphControl, bearer: dict[str, str]
) -> None:
    graph.configure(mailbox_concurrency=0)  # every request is one too many: deterministic
    throttled = http.get(events_url(graph), headers=bearer)
    assert (throttled.status_code, throttled.headers["Retry-After"]) == (429, "1")
    assert throttled.json()["error"]["code"] == "ApplicationThrottled"
    assert "MailboxConcurrency" in throttled.json()["error"]["message"]
    graph.configure(mailbox_concurrency=4)
    assert http.get(events_url(graph), headers=bearer).status_code == 200
    seen = graph.concurrency()
    assert seen["throttled"] == {"alpha@example.com": 1} and seen["in_flight"] == {}
    assert seen["peak"] == {"alpha@example.com": 1}


def test_an_application_access_policy_and_rest_disabled_mailboxes(
    http: httpx.Client, graph: GraphControl, bearer: dict[str, str]
) -> None:
    graph.set_policy(["beta@example.com"])
    blocked = http.get(events_url(graph), headers=bearer)
    assert (blocked.status_code, blocked.json()["error"]["message"]) == (403, "Access to OData is disabled.")
    assert http.get(events_url(graph, "beta@example.com"), headers=bearer).status_code == 200
    graph.control("PUT", "graph/rest-disabled", {"mailboxes": ["beta@example.com"]})
    disabled = http.get(events_url(graph, "beta@example.com"), headers=bearer)
    assert (disabled.status_code, disabled.json()["error"]["code"]) == (404, "MailboxNotEnabledForRESTAPI")


def test_graph_faults_answer_in_graphs_shape_with_retry_after(
    http: httpx.Client, graph: GraphControl, bearer: dict[str, str]
) -> None:
    graph.add_fault(operation="events.list", mailbox="alpha@example.com", status=429,
                    reason="ApplicationThrottled", retry_after=3, times=1)  # fmt: skip
    throttled = http.get(events_url(graph), headers=bearer)
    assert throttled.status_code == 429 and throttled.headers["Retry-After"] == "3"
    assert throttled.json()["error"]["code"] == "ApplicationThrottled"
    assert http.get(events_url(graph), headers=bearer).status_code == 200
    assert graph.requests()[-2]["fault"] == "ApplicationThrottled"

"""``GET /v1/events`` against a live server: each state, filter and keyset page, only the key's tenant.

Hypothesis draws the query parameters (every filter, a page size, a time window) and pages through the answer: the
pages together are exactly the tenant's targets that match, newest first, each once, whatever the page size.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from calsync.core.model.vocabulary import JOB_STATES
from calsync.core.store import accounts, targets
from calsync.core.store.targets import TargetKey, TargetRow
from tests.api.live import LiveApi
from tests.support import Pipeline, utcnow

Setup = dict[tuple[str, str], str]  # (entity, account) → the state it was left in


def _google_account(pipeline: Pipeline) -> str:
    with pipeline.clients.db.write() as conn:
        return accounts.add_account(conn, tenant_id="tenant-1", provider="google", address="g@example.com",
                                    credentials=None, options={}, account_id="acc-g").id  # fmt: skip


@pytest.fixture
def states(pipeline: Pipeline) -> Setup:
    """Targets of tenant-1 in every state (and one of tenant-2), each moved there the way the worker moves it."""
    mine, other = pipeline.account(account_id="acc-a"), pipeline.account(account_id="acc-b")
    google = _google_account(pipeline)
    pipeline.submit([pipeline.account("tenant-2", "acc-z")], tenant="tenant-2", entity_id="evt-0")  # not seen
    spread = [[mine, other], [mine], [other, google], [mine, google], [other]]
    entities = [pipeline.submit(accounts_, entity_id=f"evt-{n}").entity_id for n, accounts_ in enumerate(spread)]
    left: Setup = {}
    later = utcnow() + dt.timedelta(minutes=5)
    moves = {
        (entities[0], mine): ("retrying", lambda c, k: targets.record_retry(c, k, version=1, due_at=later)),
        (entities[0], other): ("deferred", lambda c, k: targets.record_retry(c, k, version=1, due_at=later,
                                                                             wait_reason="circuit open")),
        (entities[1], mine): ("synced", lambda c, k: targets.record_synced(c, k, version=1, external_id="x", etag=None,
                                                                           final_status="synced")),
        (entities[2], google): ("dead-lettered", lambda c, k: targets.record_failed(c, k, version=1, error_class="E",
                                                                                    message="refused")),
        (entities[3], google): ("synced", lambda c, k: targets.record_synced(c, k, version=1, external_id=None,
                                                                             etag=None, final_status="deleted")),
    }  # fmt: skip
    with pipeline.clients.db.read() as conn:
        for entity in entities:
            for row in targets.list_targets(conn, "tenant-1", entity):
                left[(entity, row.account_id)] = "pending"
    for (entity, account), (state, move) in moves.items():
        with pipeline.clients.db.write() as conn:
            move(conn, TargetKey("tenant-1", entity, account))
        left[(entity, account)] = state
    return left


def _rows(pipeline: Pipeline, states: Setup) -> list[TargetRow]:
    """Tenant-1's targets as stored, newest first."""
    with pipeline.clients.db.read() as conn:
        found = [row for entity in {e for e, _ in states} for row in targets.list_targets(conn, "tenant-1", entity)]
    return sorted(found, key=lambda r: (r.updated_at, r.event_id, r.account_id), reverse=True)


def _pages(http: httpx.Client, params: dict[str, Any]) -> list[tuple[str, str]]:
    seen: list[tuple[str, str]] = []
    cursor = None
    for _ in range(100):  # more pages than targets: a cursor that does not move on
        answer = http.get("/v1/events", params={**params, **({"cursor": cursor} if cursor else {})})
        assert answer.status_code == 200, answer.text
        page = answer.json()
        seen += [(item["entity_id"], item["account_id"]) for item in page["items"]]
        assert len(page["items"]) <= params.get("limit", 100)
        cursor = page["next_cursor"]
        if cursor is None:
            return seen
    raise AssertionError(f"the pages never end: {seen[:20]}")


def test_each_state_and_filter_finds_exactly_its_targets(api: LiveApi, pipeline: Pipeline, states: Setup) -> None:
    rows = _rows(pipeline, states)
    with api.client(api.key(scope="read")) as http:
        by_state = {state: _pages(http, {"state": state}) for state in JOB_STATES}
        everything = _pages(http, {"limit": 2})
        google = _pages(http, {"provider": "google"})
        exchange = _pages(http, {"provider": "exchange"})
        item = http.get("/v1/events", params={"entity_id": "evt-0", "account_id": "acc-a"}).json()["items"]
    for state in JOB_STATES:
        assert sorted(by_state[state]) == sorted(k for k, s in states.items() if s == state), state
    assert everything == [(r.event_id, r.account_id) for r in rows] and len(everything) == len(states)
    assert sorted(google) == sorted(k for k in states if k[1] == "acc-g") and exchange == []
    [hit] = item
    assert hit["state"] == "retrying" and hit["wait_reason"] == "retry" and hit["job_id"].startswith("job")


def test_bad_parameters_are_named(api: LiveApi, states: Setup) -> None:
    with api.client(api.key(scope="read")) as http:
        bad_cursor = http.get("/v1/events", params={"cursor": "not-a-cursor"})
        naive = http.get("/v1/events", params={"since": "2026-12-01T09:00:00"})
        unknown = http.get("/v1/events", params={"status": "pending"})
        state = http.get("/v1/events", params={"state": "queued"})
    assert bad_cursor.status_code == 422 and bad_cursor.json()["errors"][0]["field"] == "query.cursor"
    assert naive.status_code == 422 and "UTC offset" in naive.text
    assert unknown.status_code == 422 and unknown.json()["errors"][0]["field"] == "query.status"
    assert state.status_code == 422 and state.json()["errors"][0]["field"] == "query.state"


def test_pages_of_any_query_are_its_matching_targets_newest_first(
    api: LiveApi, pipeline: Pipeline, states: Setup
) -> None:
    rows = _rows(pipeline, states)
    times = sorted({row.updated_at for row in rows})
    provider = {"acc-a": "memory", "acc-b": "memory", "acc-g": "google"}

    def optional(values: Any) -> st.SearchStrategy[Any]:
        return st.none() | st.sampled_from(values)

    @given(
        state=optional(JOB_STATES),
        account=optional(["acc-a", "acc-b", "acc-g", "acc-z"]),
        entity=optional(["evt-0", "evt-2", "evt-9"]),
        kind=optional(["memory", "google", "graph"]),
        since=optional(times),
        until=optional(times),
        limit=st.integers(min_value=1, max_value=4),
    )
    @settings(max_examples=40, derandomize=True, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))  # fmt: skip
    def pages(
        state: str | None, account: str | None, entity: str | None, kind: str | None,
        since: dt.datetime | None, until: dt.datetime | None, limit: int,
    ) -> None:  # fmt: skip
        chosen = {"state": state, "account_id": account, "entity_id": entity, "provider": kind,
                  "since": since and since.isoformat(), "until": until and until.isoformat()}  # fmt: skip
        params = {name: value for name, value in chosen.items() if value is not None}
        expected = [(r.event_id, r.account_id) for r in rows
                    if (state is None or states[(r.event_id, r.account_id)] == state)
                    and account in (None, r.account_id) and entity in (None, r.event_id)
                    and kind in (None, provider[r.account_id])
                    and (since is None or r.updated_at >= since)
                    and (until is None or r.updated_at < until)]  # fmt: skip
        assert _pages(http, {**params, "limit": limit}) == expected, params

    with api.client(api.key(scope="read")) as http:
        pages()

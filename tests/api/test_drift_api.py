"""Drift over HTTP: the key's tenant's findings in cursor pages and its policy, never another tenant's; the event
view's verification; any query string answered 200 or a problem (Hypothesis), never a server error."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from calsync.core.drift import store
from calsync.core.drift.store import Finding
from calsync.core.model.drift import DRIFT_KINDS, DriftKind
from calsync.core.store.targets import TargetKey
from tests.api.live import LiveApi
from tests.support import Pipeline, utcnow

KINDS: list[DriftKind] = ["missing", "deleted_externally", "unknown_item", "missing", "modified_externally"]


@pytest.fixture
def findings(pipeline: Pipeline) -> dict[str, list[Finding]]:
    """Five findings of tenant-1 (kinds as KINDS) and one of tenant-2, interleaved by id."""
    at = utcnow()
    rows = [Finding(0, "tenant-1", "acc-1", f"evt-{i}", f"x-{i}", kind, "reported", at) for i, kind in enumerate(KINDS)]
    rows.insert(2, Finding(0, "tenant-2", "acc-2", None, "x-theirs", "unknown_item", "repaired", at))
    with pipeline.clients.db.write() as conn:
        made = store.record_findings(conn, rows)
    return {
        "mine": [f for f in made if f.tenant_id == "tenant-1"],
        "theirs": [f for f in made if f.tenant_id != "tenant-1"],
    }


def _pages(http: httpx.Client, **params: Any) -> Iterator[dict[str, Any]]:
    cursor = None
    while True:
        page = http.get("/v1/drift/findings", params={**params, **({"cursor": cursor} if cursor else {})})
        assert page.status_code == 200, page.text
        yield page.json()
        cursor = page.json()["next_cursor"]
        if cursor is None:
            return


def test_pages_list_only_the_tenants_findings_oldest_first(api: LiveApi, findings: dict[str, list[Finding]]) -> None:
    with api.client(api.key(scope="read")) as http:
        pages = list(_pages(http, limit=2))
        missing = [item["id"] for page in _pages(http, kind="missing") for item in page["items"]]
        bad_cursor = http.get("/v1/drift/findings", params={"cursor": "not-a-cursor"})
        unknown = http.get("/v1/drift/findings", params={"tenant_id": "tenant-2"})
    mine = findings["mine"]
    assert [len(page["items"]) for page in pages] == [2, 2, 1]
    assert [item["id"] for page in pages for item in page["items"]] == [f.id for f in mine]
    assert pages[0]["items"][0] == {
        "id": mine[0].id, "account_id": "acc-1", "entity_id": "evt-0", "external_id": "x-0", "kind": "missing",
        "action": "reported", "found_at": pages[0]["items"][0]["found_at"],
    }  # fmt: skip
    assert dt.datetime.fromisoformat(pages[0]["items"][0]["found_at"]) == mine[0].found_at
    assert missing == [mine[0].id, mine[3].id]
    assert bad_cursor.status_code == 422 and bad_cursor.json()["errors"][0]["field"] == "query.cursor"
    assert unknown.status_code == 422 and unknown.json()["errors"][0]["field"] == "query.tenant_id"


def test_another_tenant_sees_only_its_own_and_a_key_is_needed(api: LiveApi, findings: dict[str, list[Finding]]) -> None:
    with api.client(api.key(tenant="tenant-2", scope="read")) as http:
        theirs = http.get("/v1/drift/findings").json()
        # A cursor of tenant-1's page does not open tenant-1's findings to tenant-2.
        with api.client(api.key(scope="read")) as mine:
            cursor = mine.get("/v1/drift/findings", params={"limit": 1}).json()["next_cursor"]
        after = http.get("/v1/drift/findings", params={"cursor": cursor}).json()
    assert [item["id"] for item in theirs["items"]] == [f.id for f in findings["theirs"]]
    assert theirs["items"][0]["entity_id"] is None and theirs["items"][0]["action"] == "repaired"
    assert [item["id"] for item in after["items"]] == [f.id for f in findings["theirs"]]
    anonymous = api.client().get("/v1/drift/findings")
    assert anonymous.status_code == 401 and anonymous.headers["content-type"].startswith("application/problem+json")


def test_the_policy_is_the_tenants_own_read_by_readers_and_set_by_admins(api: LiveApi) -> None:
    admin, reader = api.client(api.key(scope="admin")), api.client(api.key(scope="read"))
    other = api.client(api.key(tenant="tenant-2", scope="admin"))
    assert reader.get("/v1/drift/policy").json() == {"policy": "report"}  # the default, before any is set
    assert admin.put("/v1/drift/policy", json={"policy": "enforce"}).json() == {"policy": "enforce"}
    assert reader.get("/v1/drift/policy").json() == {"policy": "enforce"}
    assert other.get("/v1/drift/policy").json() == {"policy": "report"}  # tenant-1's policy is not tenant-2's
    assert other.put("/v1/drift/policy", json={"policy": "off"}).status_code == 200
    assert reader.get("/v1/drift/policy").json() == {"policy": "enforce"}

    refused = reader.put("/v1/drift/policy", json={"policy": "off"})
    assert refused.status_code == 403 and refused.headers["content-type"].startswith("application/problem+json")
    unknown = admin.put("/v1/drift/policy", json={"policy": "sometimes"})
    assert unknown.status_code == 422 and unknown.json()["errors"][0]["field"] == "policy"
    extra = admin.put("/v1/drift/policy", json={"policy": "off", "tenant_id": "tenant-2"})
    assert extra.status_code == 422 and extra.json()["errors"][0]["field"] == "tenant_id"
    assert reader.get("/v1/drift/policy").json() == {"policy": "enforce"}


def test_the_event_view_says_when_each_target_was_verified_and_what_was_found(api: LiveApi, pipeline: Pipeline) -> None:
    edited, intact, unswept = (pipeline.account(account_id=f"acc-{n}") for n in ("e", "i", "u"))
    receipt = pipeline.submit([edited, intact, unswept])
    when = utcnow().replace(microsecond=0)
    with pipeline.clients.db.write() as conn:  # what a sweep records of each target it compared
        keys = {a: TargetKey("tenant-1", receipt.entity_id, a) for a in (edited, intact)}
        store.mark_verified(conn, [(keys[edited], "modified_externally"), (keys[intact], None)], now=when)
    with api.client(api.key(scope="read")) as http:
        shown = {t["account_id"]: t for t in http.get(f"/v1/events/{receipt.entity_id}").json()["targets"]}
    assert shown[edited]["drift_kind"] == "modified_externally" and shown[intact]["drift_kind"] is None
    assert dt.datetime.fromisoformat(shown[edited]["verified_at"]) == when
    assert (shown[unswept]["verified_at"], shown[unswept]["drift_kind"]) == (None, None)


_TEXT = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=80)
_QUERY = st.dictionaries(
    st.sampled_from(["kind", "limit", "cursor", "after", "tenant"]),
    st.one_of(_TEXT, st.sampled_from(DRIFT_KINDS), st.integers(-(2**70), 2**70).map(str)),
    max_size=4,
)


def test_any_query_string_is_answered_200_or_a_problem_never_a_server_error(
    api: LiveApi, findings: dict[str, list[Finding]]
) -> None:
    key = api.key(scope="read")

    @given(query=_QUERY)
    @settings(max_examples=150, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    def answered(query: dict[str, str]) -> None:
        with api.client(key) as http:
            answer = http.get("/v1/drift/findings", params=query)
        if answer.status_code == 200:
            items = answer.json()["items"]
            assert {item["id"] for item in items} <= {f.id for f in findings["mine"]}
            assert all(item["kind"] == query.get("kind", item["kind"]) for item in items)
        else:
            assert answer.status_code == 422, answer.text
            assert answer.headers["content-type"].startswith("application/problem+json")
            assert answer.json()["errors"][0]["field"].startswith("query.")

    answered()


def test_pages_of_any_size_and_kind_add_up_to_the_tenants_findings(
    api: LiveApi, findings: dict[str, list[Finding]]
) -> None:
    key = api.key(scope="read")

    @given(limit=st.integers(1, 7), kind=st.sampled_from([None, *DRIFT_KINDS]))
    @settings(max_examples=30, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    def paged(limit: int, kind: DriftKind | None) -> None:
        with api.client(key) as http:
            pages = list(_pages(http, limit=limit, **({"kind": kind} if kind else {})))
        expected = [f.id for f in findings["mine"] if kind in (None, f.kind)]
        assert [item["id"] for page in pages for item in page["items"]] == expected
        assert all(0 < len(page["items"]) <= limit for page in pages[:-1])
        assert len(pages) == max(1, -(-len(expected) // limit))

    paged()

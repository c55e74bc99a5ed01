"""The DLQ over HTTP: only the key's tenant, admin scope, filters, cursor pages, replay and discard."""

from __future__ import annotations

import pytest

from tests.api.live import LiveApi
from tests.support import Pipeline, stored_dead_letter


@pytest.fixture
def records(pipeline: Pipeline) -> dict[str, list[int]]:
    mine = pipeline.account(tenant="tenant-1", account_id="acc-mine")
    theirs = pipeline.account(tenant="tenant-2", account_id="acc-theirs")
    reasons = ["entity not found", "forbidden"]
    return {
        "mine": [stored_dead_letter(pipeline, "tenant-1", mine, f"evt-{i}", reason=reasons[i % 2]) for i in range(5)],
        "theirs": [stored_dead_letter(pipeline, "tenant-2", theirs, "evt-t")],
    }  # fmt: skip


def test_pages_list_only_the_tenants_records(api: LiveApi, records: dict[str, list[int]]) -> None:
    seen: list[int] = []
    with api.client(api.key(scope="admin")) as http:
        cursor = None
        while True:
            params: dict[str, str | int] = {"limit": 2, **({"cursor": cursor} if cursor else {})}
            page = http.get("/v1/dead-letters", params=params).json()
            seen += [item["id"] for item in page["items"]]
            cursor = page["next_cursor"]
            if cursor is None:
                break
        filtered = http.get("/v1/dead-letters", params={"reason": "forbidden"}).json()["items"]
        bad_cursor = http.get("/v1/dead-letters", params={"cursor": "not-a-cursor"})
        unknown = http.get("/v1/dead-letters", params={"colour": "red"})
    assert seen == records["mine"]
    assert [item["id"] for item in filtered] == records["mine"][1::2]
    assert bad_cursor.status_code == 422 and bad_cursor.json()["errors"][0]["field"] == "query.cursor"
    assert unknown.status_code == 422 and unknown.json()["errors"][0]["field"] == "query.colour"


def test_replay_by_ids_skips_other_tenants_records_as_not_found(
    api: LiveApi, pipeline: Pipeline, records: dict[str, list[int]]
) -> None:
    first, theirs = records["mine"][0], records["theirs"][0]
    with api.client(api.key(scope="admin")) as http:
        report = http.post("/v1/dead-letters/replay", json={"ids": [first, theirs]}).json()
        both = http.post("/v1/dead-letters/replay", json={"ids": [first], "filter": {}})
    assert [r["id"] for r in report["replayed"]] == [first]
    assert report["skipped"] == [{"id": theirs, "job_id": None, "why": "not found"}]
    assert both.status_code == 422
    assert [r.id for r in pipeline.dead_letters(tenant_id="tenant-2")] == [theirs]  # untouched


def test_replay_by_filter_and_discard(api: LiveApi, pipeline: Pipeline, records: dict[str, list[int]]) -> None:
    with api.client(api.key(scope="admin")) as http:
        report = http.post("/v1/dead-letters/replay", json={"filter": {"reason": "entity not found"}}).json()
        target = records["mine"][1]
        discarded = http.post(f"/v1/dead-letters/{target}/discard", json={"note": "obsolete"})
        twice = http.post(f"/v1/dead-letters/{target}/discard")
        foreign = http.post(f"/v1/dead-letters/{records['theirs'][0]}/discard")
        missing = http.post("/v1/dead-letters/999999/discard")
    assert sorted(r["id"] for r in report["replayed"]) == records["mine"][0::2]
    assert discarded.json() == {"id": target, "status": "discarded"}
    assert twice.status_code == 409
    assert foreign.status_code == missing.status_code == 404
    assert foreign.json()["detail"].replace(str(records["theirs"][0]), "N") == missing.json()["detail"].replace(
        "999999", "N"
    )
    assert [r.id for r in pipeline.dead_letters(tenant_id="tenant-1")] == [records["mine"][3]]


def test_the_consoles_filters_and_its_bulk_discard_have_their_api_twins(
    api: LiveApi, pipeline: Pipeline, records: dict[str, list[int]]
) -> None:
    mine = pipeline.account(tenant="tenant-1", account_id="acc-timeouts")
    slow = [
        stored_dead_letter(pipeline, "tenant-1", mine, f"evt-slow-{i}", error=f"Read TIMEOUT #{i}") for i in range(3)
    ]
    theirs = stored_dead_letter(pipeline, "tenant-2", "acc-theirs", "evt-t2", error="read timeout")
    with api.client(api.key(scope="admin")) as http:
        found = http.get("/v1/dead-letters", params={"q": "read timeout", "provider": "memory", "kind": "job"})
        none = http.get("/v1/dead-letters", params={"q": "read timeout", "provider": "google"})
        literal = http.get("/v1/dead-letters", params={"q": "read%timeout"})
        nul = http.get("/v1/dead-letters", params={"q": "a\x00b"})
        report = http.post("/v1/dead-letters/discard", json={"filter": {"q": "timeout"}, "note": "provider fixed"})
        again = http.post("/v1/dead-letters/discard", json={"ids": [slow[0], theirs]})
    assert [item["id"] for item in found.json()["items"]] == slow
    assert none.json()["items"] == [] and literal.json()["items"] == []
    assert nul.status_code == 422
    assert sorted(entry["id"] for entry in report.json()["discarded"]) == slow
    assert again.json()["discarded"] == []
    assert {(e["id"], e["why"]) for e in again.json()["skipped"]} == {
        (slow[0], "record is discarded"),
        (theirs, "not found"),
    }
    assert [r.id for r in pipeline.dead_letters(tenant_id="tenant-1")] == records["mine"]  # the others stay open
    assert [r.id for r in pipeline.dead_letters(tenant_id="tenant-2")] == [records["theirs"][0], theirs]


def test_one_record_of_the_tenant_is_read_whole(api: LiveApi, records: dict[str, list[int]]) -> None:
    first, theirs = records["mine"][0], records["theirs"][0]
    with api.client(api.key(scope="admin")) as http, api.client(api.key(scope="read")) as reader:
        mine, foreign, missing = (http.get(f"/v1/dead-letters/{i}") for i in (first, theirs, 999999))
        refused = reader.get(f"/v1/dead-letters/{first}")
    assert mine.status_code == 200 and mine.json()["id"] == first
    assert mine.json()["payload"]["job_id"] == mine.json()["job_id"] and mine.json()["error_history"] == []
    assert foreign.status_code == missing.status_code == 404 and refused.status_code == 403
    assert foreign.json()["detail"].replace(str(theirs), "N") == missing.json()["detail"].replace("999999", "N")

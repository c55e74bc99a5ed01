"""A change fanning out to many accounts: checked in one query, planned in batches, markers claimed at once."""

from __future__ import annotations

import pytest

from calsync.core.model.errors import InvalidChange
from calsync.core.producer import dedup
from calsync.core.producer.dedup import Claim, Claimed, Mark, RedisMarkers
from calsync.core.store import accounts, targets
from tests.spies import EnqueueSpy
from tests.support import Pipeline


def test_markers_are_claimed_together_each_with_its_own_answer(pipeline: Pipeline) -> None:
    runtime = pipeline.clients
    markers = RedisMarkers(runtime.redis, runtime.keys, ttl_seconds=60)
    create, update = Mark("t", "e", "a1", "create", 1), Mark("t", "e", "a2", "update", 2)
    assert markers.claim_all([Claim(create, "job-1"), Claim(update, "job-2")]) == [Claimed(None), Claimed(None)]
    again = [
        Claim(create, "job-3"),  # the same enqueue again: the first job
        Claim(update._replace(account_id="a3"), "job-4"),  # new
    ]
    assert [c.earlier for c in markers.claim_all(again)] == ["job-1", None]
    assert markers.claim_all([]) == []


def test_claims_past_one_script_call_are_answered_in_order(pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dedup, "_CHUNK", 2)
    runtime = pipeline.clients
    markers = RedisMarkers(runtime.redis, runtime.keys, ttl_seconds=60, window_ms=1000, max_wait_ms=10_000)
    marks = [Mark("t", "e", f"a{n}", "create", 1) for n in range(5)]
    assert markers.claim_all([Claim(m, f"job-{n}") for n, m in enumerate(marks)]) == [Claimed(None)] * 5
    again = markers.claim_all([Claim(m, f"new-{n}") for n, m in enumerate(marks)])
    assert again == [Claimed(f"job-{n}") for n in range(5)]


def test_a_hundred_account_change_plans_every_target_and_enqueues_each_once(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = [pipeline.account(account_id=f"acc-{n:03}") for n in range(100)]
    spy = EnqueueSpy(pipeline.broker, monkeypatch)
    created = pipeline.submit(ids, entity_id="evt-fan", title="v1")
    assert created.version == 1 and len(set(created.job_ids)) == 100 and len(spy.sent) == 100
    moved = pipeline.submit(ids[:60], entity_id="evt-fan", title="v2")  # 40 accounts dropped: deletes
    assert moved.version == 2 and len(spy.sent) == 200
    with pipeline.clients.db.read() as conn:
        rows = {row.account_id: row for row in targets.list_targets(conn, "tenant-1", "evt-fan")}
    assert len(rows) == 100
    assert {r.wanted for a, r in rows.items() if a in ids[:60]} == {"present"}
    assert {r.wanted for a, r in rows.items() if a in ids[60:]} == {"absent"}
    assert {(r.wanted_version, r.status) for r in rows.values()} == {(2, "pending")}
    assert pipeline.submit(ids[:60], entity_id="evt-fan", title="v2").job_ids == moved.job_ids  # retried: same jobs
    assert len(spy.sent) == 200
    cancelled = pipeline.submit(None, entity_id="evt-fan", operation="delete")
    assert cancelled.version == 3 and len(cancelled.job_ids) == 100


def test_accounts_are_looked_up_in_one_query_and_every_bad_one_is_named(pipeline: Pipeline) -> None:
    own = pipeline.account(account_id="acc-own")
    other = pipeline.account(tenant="tenant-2", account_id="acc-other")
    with pipeline.clients.db.read() as conn:
        found = accounts.get_standings(conn, [own, other, "acc-missing"])
        assert sorted(found) == sorted([own, other]) and found[other].tenant_id == "tenant-2"
        assert accounts.get_standings(conn, []) == {}
    with pytest.raises(InvalidChange, match="account acc-missing does not exist for tenant tenant-1"):
        pipeline.submit([own, "acc-missing"])
    named = f"accounts acc-missing, {other}, acc-gone do not exist for tenant tenant-1"
    with pytest.raises(InvalidChange, match=named):
        pipeline.submit(["acc-missing", own, other, "acc-gone"])

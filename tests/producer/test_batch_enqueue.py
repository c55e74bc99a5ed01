"""A fan-out's jobs enqueued together: each on its lane, and one that could not be enqueued never lost."""

from __future__ import annotations

from typing import Any

import dramatiq
import pytest

from calsync.core.producer.reconcile import reconcile
from tests.producer.broker_queue import queued_payloads
from tests.support import Pipeline


@pytest.mark.both_brokers
def test_a_hundred_jobs_sent_together_are_all_run(pipeline: Pipeline) -> None:
    accounts = [pipeline.account(account_id=f"acc-{n:03}") for n in range(100)]
    receipt = pipeline.submit(accounts, entity_id="evt-batch")
    assert len(set(receipt.job_ids)) == 100 and receipt.deferred_accounts == []
    with pipeline.worker():
        for account in accounts:
            pipeline.wait_target("evt-batch", account, "synced")
    assert pipeline.outcomes() == {"success": 100}


def test_a_failed_enqueue_leaves_its_target_pending_for_the_reconciler_and_the_others_go_out(
    pipeline: Pipeline, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = pipeline.broker.enqueue

    def refused_for_two(message: dramatiq.Message[Any], *, delay: int | None = None) -> dramatiq.Message[Any]:
        if message.args[0]["account_id"] in ("acc-2", "acc-3"):
            raise ConnectionError("connection reset")
        return real(message, delay=delay)

    monkeypatch.setattr(pipeline.broker, "enqueue", refused_for_two)
    accounts = [pipeline.account(account_id=f"acc-{n}") for n in range(5)]
    receipt = pipeline.submit(accounts, entity_id="evt-part")
    assert receipt.deferred_accounts == ["acc-2", "acc-3"] and len(receipt.job_ids) == 3
    queued = queued_payloads(redis_url, pipeline.settings.redis_namespace)
    assert [p["account_id"] for p in queued] == ["acc-0", "acc-1", "acc-4"]
    keys = pipeline.clients.keys
    for account in ("acc-2", "acc-3"):
        row = pipeline.target("evt-part", account)
        assert (row.status, row.due_at) == ("pending", None)  # the intent stays, due at the next pass
        assert pipeline.clients.redis.get(keys.dedup("tenant-1", "evt-part", account, "update", 1)) is None
    monkeypatch.undo()

    assert len(reconcile(pipeline.clients).requeued) == 2  # the two deferred targets, not the three queued
    with pipeline.worker():
        for account in accounts:
            pipeline.wait_target("evt-part", account, "synced")

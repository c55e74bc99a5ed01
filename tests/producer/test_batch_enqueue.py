"""A fan-out's jobs enqueued as one batch: where Dramatiq's consumers find them, and a failed part never lost."""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis

from calsync.core.messaging import redis_batch
from calsync.core.messaging.batch import Outgoing, enqueue_many
from calsync.core.messaging.envelope import Refused, read_message
from calsync.core.messaging.messages import sync_message
from calsync.core.model.payload import new_payload
from calsync.core.producer.reconcile import reconcile
from tests.producer.broker_queue import queued_payloads
from tests.support import Pipeline


def _message(queue: str, account: str) -> Any:
    payload = new_payload(tenant_id="tenant-1", entity_id="evt-b", account_id=account, operation="create",
                          version=1, trace_id="trace-b")  # fmt: skip
    return sync_message(queue, payload)


def _stored(client: redis.Redis, namespace: str, queue: str) -> list[dict[str, Any]]:
    ids = client.lrange(f"{namespace}:{queue}", 0, -1)
    return [json.loads(client.hget(f"{namespace}:{queue}.msgs", message_id)) for message_id in ids]


def test_a_batch_is_stored_exactly_as_dramatiqs_own_enqueue_stores_each_message(pipeline: Pipeline) -> None:
    broker, ns, queue = pipeline.broker, pipeline.settings.redis_namespace, pipeline.settings.queue
    client = pipeline.runtime.redis
    broker.enqueue(_message(queue, "acc-dramatiq"))
    broker.enqueue(_message(queue, "acc-dramatiq-later"), delay=60_000)
    batch = [Outgoing(_message(queue, f"acc-{n}")) for n in range(3)] + [Outgoing(_message(queue, "acc-later"), 60_000)]
    assert enqueue_many(broker, batch) == [True] * 4

    ready, delayed = _stored(client, ns, queue), _stored(client, ns, f"{queue}.DQ")
    assert [m["args"][0]["account_id"] for m in ready] == ["acc-dramatiq", "acc-0", "acc-1", "acc-2"]  # in order
    assert [m["args"][0]["account_id"] for m in delayed] == ["acc-dramatiq-later", "acc-later"]
    ours, theirs = ready[1], ready[0]
    assert ours.keys() == theirs.keys() and ours["options"].keys() == theirs["options"].keys() == {"redis_message_id"}
    assert delayed[1]["options"].keys() == delayed[0]["options"].keys() == {"redis_message_id", "eta"}
    assert delayed[1]["queue_name"] == delayed[0]["queue_name"] == f"{queue}.DQ"
    assert client.zscore(f"{ns}:__heartbeats__", broker.broker_id) is not None  # the broker's beat, as dispatch
    for doc, on in [(m, queue) for m in ready] + [(m, f"{queue}.DQ") for m in delayed]:
        body = json.dumps(doc).encode()
        queued_id = doc["options"]["redis_message_id"]
        admitted = read_message(body, broker=broker, queue_name=on, broker_message_id=queued_id,
                                max_bytes=pipeline.settings.max_message_bytes)  # fmt: skip
        assert not isinstance(admitted, Refused), admitted  # the envelope check admits every one


@pytest.mark.both_brokers
def test_a_hundred_jobs_sent_as_one_batch_are_all_run(pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(redis_batch, "CHUNK", 30)  # several chunks (no effect on RabbitMQ: one enqueue each)
    accounts = [pipeline.account(account_id=f"acc-{n:03}") for n in range(100)]
    receipt = pipeline.submit(accounts, entity_id="evt-batch")
    assert len(set(receipt.job_ids)) == 100 and receipt.deferred_accounts == []
    with pipeline.worker():
        for account in accounts:
            pipeline.wait_target("evt-batch", account, "synced")
    assert pipeline.outcomes() == {"success": 100}


def test_a_failed_chunk_leaves_its_targets_pending_for_the_reconciler_and_the_others_go_out(
    pipeline: Pipeline, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(redis_batch, "CHUNK", 2)
    batch = pipeline.broker._batch
    real, calls = batch._script, []

    def second_chunk_fails(**kwargs: Any) -> Any:
        calls.append(kwargs)
        if len(calls) == 2:
            raise redis.ConnectionError("connection reset")
        return real(**kwargs)

    monkeypatch.setattr(batch, "_script", second_chunk_fails)
    accounts = [pipeline.account(account_id=f"acc-{n}") for n in range(5)]
    receipt = pipeline.submit(accounts, entity_id="evt-part")
    assert receipt.deferred_accounts == ["acc-2", "acc-3"] and len(receipt.job_ids) == 3
    queued = queued_payloads(redis_url, pipeline.settings.redis_namespace)
    assert [p["account_id"] for p in queued] == ["acc-0", "acc-1", "acc-4"]
    keys = pipeline.runtime.keys
    for account in ("acc-2", "acc-3"):
        row = pipeline.target("evt-part", account)
        assert (row.status, row.due_at) == ("pending", None)  # the intent stays, due at the next pass
        assert pipeline.runtime.redis.get(keys.dedup("tenant-1", "evt-part", account, "update", 1)) is None
    monkeypatch.undo()

    assert len(reconcile(pipeline.runtime).requeued) == 2  # the two deferred targets, not the three queued
    with pipeline.worker():
        for account in accounts:
            pipeline.wait_target("evt-part", account, "synced")

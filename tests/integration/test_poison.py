"""A queue no message can poison: every kind of bad message, pushed raw, ends in calsync's DLQ.

Each body goes onto the broker the way another team's service would put it there (Redis: ``HSET
<ns>:<q>.msgs`` + ``RPUSH <ns>:<q>``; RabbitMQ: ``basic_publish`` of the bytes), all of them before the
worker starts, so they are prefetched together with their neighbours. Then: every one is recorded
(quarantined, or dead-lettered as a job) with its reason; the broker holds none of them any more
(only the job dead letters are also in Dramatiq's XQ); every worker and consumer thread is alive; and a
good job enqueued after the batch syncs.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from calsync.core.messaging.quarantine import RAW_BODY_LIMIT
from tests.integration.poison_cases import Case, RawProducer, poison_cases
from tests.support import Pipeline, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.both_brokers]

THREADS = 3


def _expected(case: Case, body: bytes) -> tuple[str, Any]:
    if case.ends.startswith("quarantined:"):
        return case.ends, body[:RAW_BODY_LIMIT]
    return case.ends, json.loads(body)["message_id"]


def _found(pipeline: Pipeline) -> Counter[tuple[str, Any]]:
    found: Counter[tuple[str, Any]] = Counter()
    for record in pipeline.dead_letters():
        key = record.raw_body if record.kind == "quarantined" else record.message_id
        found[(record.reason, key)] += 1
    return found


def test_no_message_can_poison_the_queue(pipeline: Pipeline, broker_kind: str) -> None:
    account = pipeline.account(account_id="acc-real")
    real = pipeline.submit([account], title="real")
    cases = [c for c in poison_cases(pipeline.settings.queue, real_entity=real.entity_id, real_account=account)
             if broker_kind in c.brokers]  # fmt: skip
    raw = RawProducer(pipeline, broker_kind)
    try:
        expected = Counter(_expected(case, raw.push(case)) for case in cases)
        jobs = sum(1 for case in cases if not case.ends.startswith("quarantined:"))

        with pipeline.worker(threads=THREADS) as worker:
            wait_until(lambda: _found(pipeline) == expected, timeout=60, what="every poison message to be recorded")
            assert pipeline.wait_target(real.entity_id, account, "synced").synced_version == 1
            assert len(worker.workers) == THREADS and all(t.is_alive() for t in worker.workers)
            assert all(t.is_alive() for t in worker.consumers.values())
            good = pipeline.submit([account], title="after the poison")
            pipeline.wait_target(good.entity_id, account, "synced")
            broker_id = getattr(pipeline.broker, "broker_id", "")
            if broker_kind == "redis":
                assert raw.held(broker_id) == {"ready": 0, "bodies": 0, "in_flight": 0, "xq": jobs}
        if broker_kind == "rabbitmq":  # unacked deliveries return to the queue when the worker's channels close
            assert raw.held("") == {"ready": 0, "xq": jobs}
    finally:
        raw.close()

    records = pipeline.dead_letters()
    assert len(records) == len(cases)
    by_reason = {r.reason: r for r in records}
    huge = next(r for r in records if r.job_id == "job-real-entity-huge-version")
    assert "target_version" in huge.last_error and huge.entity_id == real.entity_id
    quarantined = [r for r in records if r.kind == "quarantined"]
    assert all(r.origin and r.origin["broker"] == broker_kind and r.raw_size is not None for r in quarantined)
    too_large = by_reason["quarantined: too large"]
    assert too_large.raw_size == 2 * 1024 * 1024 and too_large.raw_body is not None
    assert len(too_large.raw_body) == RAW_BODY_LIMIT and too_large.origin and too_large.origin["truncated"]


def test_a_refused_message_stays_queued_while_the_quarantine_is_down(
    pipeline: Pipeline, broker_kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = pipeline.clients.db
    real_write = db.write
    refused: list[int] = []

    def down_three_times() -> Any:
        if len(refused) < 3:
            refused.append(1)
            raise OSError("database down")
        return real_write()

    raw = RawProducer(pipeline, broker_kind)
    try:
        body = raw.push_body(lambda rid: b"not json")
        monkeypatch.setattr(db, "write", down_three_times)
        with pipeline.worker(threads=2) as worker:
            [record] = wait_until(lambda: pipeline.dead_letters(kind="quarantined"), what="the quarantined message")
            assert len(refused) == 3 and record.raw_body == body and record.reason == "quarantined: not JSON"
            assert all(t.is_alive() for t in [*worker.workers, *worker.consumers.values()])
            if broker_kind == "redis":
                broker_id = getattr(pipeline.broker, "broker_id", "")
                wait_until(lambda: raw.held(broker_id) == {"ready": 0, "bodies": 0, "in_flight": 0, "xq": 0})
        if broker_kind == "rabbitmq":
            assert raw.held("") == {"ready": 0, "xq": 0}
    finally:
        raw.close()

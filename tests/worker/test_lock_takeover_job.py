"""A job that takes over a dead worker's lock still has exactly one effect: it checks the record under the lock."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from dramatiq.brokers.stub import StubBroker

from calsync.core.model.payload import JobPayload, new_payload
from calsync.core.model.vocabulary import Outcome
from calsync.core.redis.locks import LockManager, OwnedLock
from calsync.core.store import idempotency, targets
from calsync.core.store.targets import TargetKey
from calsync.core.worker.delivery import Delivery
from calsync.core.worker.heartbeat import Heartbeat
from calsync.core.worker.job import run_sync
from calsync.core.worker.metrics import worker_id
from tests.support import Pipeline


@pytest.fixture
def dead_owner(pipeline: Pipeline) -> Iterator[LockManager]:
    """The lock manager of a worker that dies holding a lock; this test's runtime is a live worker."""
    rt = pipeline.clients
    dead_beat, live_beat = rt.keys.worker_heartbeat("dead:1"), rt.keys.worker_heartbeat(worker_id())
    rt.redis.set(dead_beat, "{}", px=30_000)
    rt.redis.set(live_beat, "{}", px=30_000)  # this process: the owner its worker's locks name
    manager = LockManager(rt.redis, ttl_seconds=pipeline.settings.lock_ttl, owner=lambda: dead_beat)
    yield manager
    manager.close()


def _crashed_holding(pipeline: Pipeline, dead_owner: LockManager) -> tuple[JobPayload, OwnedLock]:
    account = pipeline.account()
    entity = pipeline.submit([account]).entity_id
    payload = new_payload(tenant_id="tenant-1", entity_id=entity, account_id=account, operation="create",
                          version=1, trace_id="trace-takeover")  # fmt: skip
    held = dead_owner.acquire(pipeline.clients.keys.lock("tenant-1", entity, account))
    assert held is not None
    pipeline.clients.redis.delete(pipeline.clients.keys.worker_heartbeat("dead:1"))  # SIGKILL: the beat expires
    return payload, held


def _run(pipeline: Pipeline, stub: StubBroker, payload: JobPayload) -> Outcome:
    delivery = Delivery("m-2", "sync_calendar_event", "calendar")
    return run_sync(pipeline.job_parts(stub), delivery, [payload.to_message_arg()], {})


def test_a_dead_workers_lock_is_taken_over_and_the_job_completes(
    pipeline: Pipeline, stub: StubBroker, dead_owner: LockManager
) -> None:
    payload, _held = _crashed_holding(pipeline, dead_owner)
    assert _run(pipeline, stub, payload) is Outcome.SUCCESS
    assert len(pipeline.provider.calls()) == 1
    assert pipeline.clients.redis.get(pipeline.clients.keys.lock("tenant-1", payload.entity_id,
                                                                 payload.account_id)) is None  # fmt: skip


def test_an_effect_the_dead_worker_committed_is_not_repeated_after_a_takeover(
    pipeline: Pipeline, stub: StubBroker, dead_owner: LockManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt = pipeline.clients
    payload, _held = _crashed_holding(pipeline, dead_owner)
    real_acquire = pipeline.app.locks.acquire
    taken: list[OwnedLock | None] = []

    def committed_meanwhile(key: str, **options: Any) -> OwnedLock | None:
        # The dead worker's commit landed after this job's read before the lock, as a paused one's can.
        with rt.db.write() as tx:
            targets.record_synced(tx, TargetKey("tenant-1", payload.entity_id, payload.account_id), version=1,
                                  external_id="x", etag=None, final_status="synced")  # fmt: skip
            idempotency.record_success(tx, payload.idempotency_key, job_id="dead", result={}, ttl_seconds=60)
        taken.append(real_acquire(key, **options))
        return taken[-1]

    monkeypatch.setattr(pipeline.app.locks, "acquire", committed_meanwhile)
    assert _run(pipeline, stub, payload) is Outcome.ALREADY_DONE
    assert taken[0] is not None and taken[0].taken_over and pipeline.provider.calls() == []


def test_a_worker_beats_before_its_threads_start_so_its_first_locks_name_a_live_owner(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt = pipeline.clients
    [heartbeat] = [m for m in pipeline.broker.middleware if isinstance(m, Heartbeat)]
    account = pipeline.account()
    receipt = pipeline.submit([account])  # queued before the worker boots: its first job runs at once
    heartbeat.before_worker_boot(pipeline.broker, None)  # type: ignore[arg-type]  # the hook needs no worker
    assert rt.redis.exists(heartbeat.keys.worker_heartbeat(heartbeat.worker))  # beaten before any worker thread exists
    key = rt.keys.lock("tenant-1", receipt.entity_id, account)
    seen: list[bytes | None] = []
    real_upsert = pipeline.provider.upsert

    def watched(*args: Any) -> Any:
        seen.append(rt.redis.get(key))
        return real_upsert(*args)

    monkeypatch.setattr(pipeline.provider, "upsert", watched)
    with pipeline.worker():
        pipeline.wait_target(receipt.entity_id, account, "synced")
    assert seen and (seen[0] or b"").startswith(f"{heartbeat.keys.worker_heartbeat(heartbeat.worker)}|".encode())

"""Stale jobs are dropped before the target lock; jobs of the current version still serialise on it."""

from __future__ import annotations

import pytest
from dramatiq.brokers.stub import StubBroker

from calsync.core.model.errors import TargetLocked
from calsync.core.model.payload import JobPayload, new_payload
from calsync.core.model.vocabulary import Outcome
from calsync.core.store import targets
from calsync.core.store.targets import TargetKey
from calsync.core.worker.delivery import Delivery
from calsync.core.worker.job import run_sync
from tests.support import Pipeline


def _payload(entity: str, account: str, version: int) -> JobPayload:
    return new_payload(tenant_id="tenant-1", entity_id=entity, account_id=account, operation="update",
                       version=version, trace_id="trace-stale")  # fmt: skip


def _run(pipeline: Pipeline, stub: StubBroker, payload: JobPayload) -> Outcome:
    delivery = Delivery("m-1", "sync_calendar_event", "calendar")
    return run_sync(pipeline.job_parts(stub), delivery, [payload.to_message_arg()], {})


def _target(pipeline: Pipeline) -> tuple[str, str]:
    account = pipeline.account()
    entity = pipeline.submit([account]).entity_id
    pipeline.submit(None, entity_id=entity, title="v2")  # the event is at version 2 now
    return entity, account


def test_a_superseded_job_is_stale_without_waiting_for_a_held_lock(pipeline: Pipeline, stub: StubBroker) -> None:
    rt = pipeline.clients
    entity, account = _target(pipeline)
    key = rt.keys.lock("tenant-1", entity, account)
    held = pipeline.app.locks.acquire(key)
    assert held is not None
    assert _run(pipeline, stub, _payload(entity, account, version=1)) is Outcome.STALE
    assert rt.redis.get(key) == held.token.encode() and pipeline.app.locks.release(held)  # never written by the job
    assert pipeline.provider.calls() == []


def test_an_already_synced_version_never_writes_the_lock_key(
    pipeline: Pipeline, stub: StubBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt = pipeline.clients
    entity, account = _target(pipeline)
    with rt.db.write() as tx:
        targets.record_synced(tx, TargetKey("tenant-1", entity, account), version=2, external_id="x", etag=None,
                              final_status="synced")  # fmt: skip
    taken: list[str] = []
    real_acquire = pipeline.app.locks.acquire
    monkeypatch.setattr(pipeline.app.locks, "acquire", lambda key, **kw: taken.append(key) or real_acquire(key, **kw))
    assert _run(pipeline, stub, _payload(entity, account, version=2)) is Outcome.STALE
    assert taken == [] and rt.redis.get(rt.keys.lock("tenant-1", entity, account)) is None


def test_a_duplicate_of_the_current_version_still_waits_for_the_lock(pipeline: Pipeline, stub: StubBroker) -> None:
    rt = pipeline.clients
    entity, account = _target(pipeline)
    held = pipeline.app.locks.acquire(rt.keys.lock("tenant-1", entity, account))
    with pytest.raises(TargetLocked):
        _run(pipeline, stub, _payload(entity, account, version=2))
    assert held is not None and pipeline.app.locks.release(held)
    assert _run(pipeline, stub, _payload(entity, account, version=2)) is Outcome.SUCCESS
    assert len(pipeline.provider.calls()) == 1

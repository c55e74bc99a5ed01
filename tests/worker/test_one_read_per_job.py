"""A job reads its state once, before the lock, unless the lock's handover says a holder wrote since.

What a job hands over on release is what it left the target as (``<synced version>:<create sent>``), or
nothing (``unknown`` stays) when the outcome of one of its writes is unknown.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from dramatiq.brokers.stub import StubBroker

from calsync.core.model.errors import EntityNotFound, ProviderUnavailable
from calsync.core.model.payload import JobPayload, new_payload
from calsync.core.model.vocabulary import Outcome
from calsync.core.redis.locks import UNKNOWN, OwnedLock
from calsync.core.store import idempotency
from calsync.core.worker import job
from calsync.core.worker.delivery import Delivery
from calsync.core.worker.job import run_sync
from calsync.core.worker.metrics import worker_id
from calsync.core.worker.snapshot import load_snapshot
from tests.support import Pipeline


@pytest.fixture
def reads(pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The state reads of the jobs run, in a worker whose locks name a live owner (so they keep a handover)."""
    rt = pipeline.clients
    beat = rt.keys.worker_heartbeat(worker_id())  # this process: the owner its worker's locks name
    rt.redis.set(beat, "{}", px=60_000)
    seen: list[str] = []
    real = job.load_snapshot

    def counted(*args: Any) -> Any:
        seen.append("read")
        return real(*args)

    monkeypatch.setattr(job, "load_snapshot", counted)
    yield seen


def _payload(entity: str, account: str, version: int, operation: str = "create") -> JobPayload:
    return new_payload(tenant_id="tenant-1", entity_id=entity, account_id=account, operation=operation,  # type: ignore[arg-type]
                       version=version, trace_id="trace-one-read")  # fmt: skip


def _run(pipeline: Pipeline, stub: StubBroker, payload: JobPayload) -> Outcome:
    return run_sync(pipeline.job_parts(stub), Delivery("m-1", "sync_calendar_event", "calendar"),
                    [payload.to_message_arg()], {})  # fmt: skip


def _handover(pipeline: Pipeline, entity: str, account: str) -> bytes | None:
    rt = pipeline.clients
    return rt.redis.get(rt.keys.handover("tenant-1", entity, account))


def test_a_current_job_reads_its_state_once_and_hands_over_what_it_left(
    pipeline: Pipeline, stub: StubBroker, reads: list[str]
) -> None:
    account = pipeline.account()
    entity = pipeline.submit([account]).entity_id
    assert _run(pipeline, stub, _payload(entity, account, 1)) is Outcome.SUCCESS
    assert reads == ["read"] and _handover(pipeline, entity, account) == b"1:0"
    pipeline.submit(None, entity_id=entity, title="v2")
    reads.clear()
    assert _run(pipeline, stub, _payload(entity, account, 2, "update")) is Outcome.SUCCESS
    assert reads == ["read"] and _handover(pipeline, entity, account) == b"2:0"
    assert len(pipeline.provider.calls()) == 2


def test_a_twin_that_finished_between_the_read_and_the_lock_is_seen(
    pipeline: Pipeline, stub: StubBroker, reads: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    account = pipeline.account()
    entity = pipeline.submit([account]).entity_id
    payload = _payload(entity, account, 1)
    real_acquire = pipeline.app.locks.acquire

    def twin_first(key: str, **options: Any) -> OwnedLock | None:
        monkeypatch.setattr(pipeline.app.locks, "acquire", real_acquire)
        assert _run(pipeline, stub, payload) is Outcome.SUCCESS  # a redelivered twin, start to finish
        return real_acquire(key, **options)

    monkeypatch.setattr(pipeline.app.locks, "acquire", twin_first)
    assert _run(pipeline, stub, payload) is Outcome.ALREADY_DONE  # read again under the lock: the twin's record
    assert len(pipeline.provider.calls()) == 1
    assert reads == ["read", "read", "read"]  # this job's early read, the twin's, and this job's under the lock


def test_a_handover_left_held_makes_the_next_job_read_again(
    pipeline: Pipeline, stub: StubBroker, reads: list[str]
) -> None:
    rt = pipeline.clients
    account = pipeline.account()
    entity = pipeline.submit([account]).entity_id
    lock, handover = rt.keys.lock("tenant-1", entity, account), rt.keys.handover("tenant-1", entity, account)
    other = pipeline.app.locks.acquire(lock, handover=handover)
    assert other is not None and pipeline.app.locks.release(other)  # a holder that could not say what it left
    assert _run(pipeline, stub, _payload(entity, account, 1)) is Outcome.SUCCESS
    assert reads == ["read", "read"]


def test_a_result_that_lost_its_compare_and_set_hands_over_nothing(
    pipeline: Pipeline, stub: StubBroker, reads: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    account = pipeline.account()
    entity = pipeline.submit([account]).entity_id
    monkeypatch.setattr(job, "_record_result", lambda *args: False)  # a paused holder recorded a newer version
    assert _run(pipeline, stub, _payload(entity, account, 1)) is Outcome.SUCCESS
    assert _handover(pipeline, entity, account) == UNKNOWN.encode()


def test_a_create_marker_is_handed_over_even_when_the_call_then_fails(
    pipeline: Pipeline, stub: StubBroker, reads: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    account = pipeline.account()
    entity = pipeline.submit([account]).entity_id
    monkeypatch.setattr(pipeline.provider, "needs_create_marker", True, raising=False)  # as the EWS adapter
    real_upsert = pipeline.provider.upsert

    def unavailable(*args: Any) -> Any:
        raise ProviderUnavailable("503 from the provider")

    monkeypatch.setattr(pipeline.provider, "upsert", unavailable)
    with pytest.raises(ProviderUnavailable):
        _run(pipeline, stub, _payload(entity, account, 1))
    assert _handover(pipeline, entity, account) == b"0:1"  # the marker is committed; nothing else changed
    monkeypatch.setattr(pipeline.provider, "upsert", real_upsert)
    reads.clear()
    assert _run(pipeline, stub, _payload(entity, account, 1)) is Outcome.SUCCESS  # the retry
    assert reads == ["read"] and _handover(pipeline, entity, account) == b"1:1"
    assert pipeline.target(entity, account).create_attempted


def test_with_the_handover_not_trusted_a_job_reads_again_under_the_lock(
    pipeline: Pipeline, stub: StubBroker, reads: list[str]
) -> None:
    account = pipeline.account()
    entity = pipeline.submit([account]).entity_id
    parts = replace(pipeline.job_parts(stub), trust_handover=False)  # LOCK_HANDOVER=false, for a rolling upgrade
    delivery = Delivery("m-1", "sync_calendar_event", "calendar")
    assert run_sync(parts, delivery, [_payload(entity, account, 1).to_message_arg()], {}) is Outcome.SUCCESS
    assert reads == ["read", "read"] and _handover(pipeline, entity, account) == b"1:0"  # written all the same


def test_a_job_for_a_missing_account_reads_the_rest_and_ends_not_found(pipeline: Pipeline, stub: StubBroker) -> None:
    """The one read still says what exists when the account does not: the event (so the job names what is missing),
    no target, and whether the job's effect is recorded as done."""
    account = pipeline.account()
    entity = pipeline.submit([account]).entity_id
    payload = _payload(entity, "acc-gone", 1)
    snapshot = load_snapshot(pipeline.clients.db, pipeline.clients.cipher, payload)
    assert snapshot.account is None and snapshot.target is None and not snapshot.already_done
    assert snapshot.event is not None and snapshot.event.id == entity
    with pytest.raises(EntityNotFound, match=f"is not synced to account {payload.account_id}"):
        _run(pipeline, stub, payload)
    with pipeline.clients.db.write() as conn:
        idempotency.record_success(conn, payload.idempotency_key, job_id=payload.job_id, result={}, ttl_seconds=60)
    assert load_snapshot(pipeline.clients.db, pipeline.clients.cipher, payload).already_done
    assert _run(pipeline, stub, payload) is Outcome.ALREADY_DONE

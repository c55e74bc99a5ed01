"""Each middleware on its own: hooks called directly with a real database and Redis, and a StubBroker
to capture what they enqueue."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import dramatiq
import pytest
from dramatiq.brokers.stub import StubBroker
from dramatiq.errors import BrokerConnectionError
from dramatiq.middleware import SkipMessage
from sqlalchemy import update

from calsync.core.messaging.messages import sync_message
from calsync.core.model.errors import Forbidden, InvalidPayload, LockBusy, ProviderUnavailable, RateLimited
from calsync.core.model.payload import JobPayload, new_payload
from calsync.core.model.vocabulary import DeadLetterCause
from calsync.core.runtime import Runtime
from calsync.core.store import idempotency, targets
from calsync.core.store.schema import idempotency_records
from calsync.core.store.targets import TargetKey
from calsync.core.worker.context import JobContext, MiddlewareFailure, current_job, start_job
from calsync.core.worker.middleware.dead_letters import DeadLetterRecorder, DeadLetterStoreUnavailable
from calsync.core.worker.middleware.idempotency import IdempotencyGuard
from calsync.core.worker.middleware.locking import ResourceLocking
from calsync.core.worker.middleware.retries import ScheduledRetries
from calsync.core.worker.middleware.stale import StaleVersionSkip
from calsync.core.worker.middleware.validation import PayloadValidation
from tests.support import Pipeline


@pytest.fixture
def stub() -> Iterator[StubBroker]:
    broker = StubBroker(middleware=[])
    broker.declare_queue("calendar")
    yield broker
    broker.close()


def _delivery(pipeline: Pipeline, payload: JobPayload, **options: Any) -> dramatiq.MessageProxy:
    message = sync_message(pipeline.settings.queue, payload)
    proxy = dramatiq.broker.MessageProxy(message.copy(options=options))
    ctx = JobContext(proxy.message_id, proxy.actor_name, proxy.queue_name, payload=payload)
    start_job(ctx)
    return proxy


def _payload(entity: str, account: str = "acc", version: int = 1, op: Any = "create") -> JobPayload:
    return new_payload(tenant_id="tenant-1", entity_id=entity, account_id=account, operation=op, version=version,
                       trace_id="trace-unit")  # fmt: skip


def _submitted(pipeline: Pipeline) -> tuple[str, str, JobPayload]:
    account = pipeline.account()
    receipt = pipeline.submit([account])
    return receipt.entity_id, account, _payload(receipt.entity_id, account)


def _queued(stub: StubBroker, queue: str) -> list[dramatiq.Message[Any]]:
    return [dramatiq.Message.decode(body) for body in stub.queues[queue].queue]


# --- PayloadValidation ------------------------------------------------------------------------------


def test_validation_dead_letters_a_corrupt_payload_at_once(pipeline: Pipeline, stub: StubBroker) -> None:
    message = dramatiq.broker.MessageProxy(
        dramatiq.Message(
            queue_name="calendar", actor_name="sync_calendar_event", args=({"job_id": 1},), kwargs={}, options={}
        )
    )
    start_job(JobContext(message.message_id, message.actor_name, "calendar"))
    with pytest.raises(SkipMessage):
        PayloadValidation().before_process_message(stub, message)
    ctx = current_job()
    assert message.failed and ctx is not None and isinstance(ctx.error, InvalidPayload)
    assert ctx.outcome == "dead_lettered"


def test_validation_parses_a_good_payload_once_for_everyone(pipeline: Pipeline, stub: StubBroker) -> None:
    payload = _payload("e1")
    message = _delivery(pipeline, payload)
    ctx = current_job()
    assert ctx is not None
    ctx.payload = None
    PayloadValidation().before_process_message(stub, message)
    assert ctx.payload == payload and not message.failed


# --- IdempotencyGuard -------------------------------------------------------------------------------


def test_idempotency_acks_a_job_whose_effect_is_recorded(pipeline: Pipeline, stub: StubBroker) -> None:
    payload = _payload("e1")
    guard = IdempotencyGuard(pipeline.runtime)
    guard.before_process_message(stub, _delivery(pipeline, payload))  # nothing recorded: goes on

    db = pipeline.runtime.db
    with db.direct_write() as tx:
        idempotency.record_success(tx, payload.idempotency_key, job_id="earlier", result={}, ttl_seconds=60)
    with pytest.raises(SkipMessage):
        guard.before_process_message(stub, _delivery(pipeline, payload))
    ctx = current_job()
    assert ctx is not None and ctx.outcome == "already_done"


def test_an_expired_idempotency_record_no_longer_counts(pipeline: Pipeline) -> None:
    key = _payload("e1").idempotency_key
    db = pipeline.runtime.db
    with db.direct_write() as tx:
        idempotency.record_success(tx, key, job_id="old", result={}, ttl_seconds=60)
    with db.write() as conn:
        assert idempotency.succeeded(conn, key) and idempotency.purge_expired(conn) == 0
        past = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=1)
        conn.execute(update(idempotency_records).values(expires_at=past))  # the TTL elapsed
        assert not idempotency.succeeded(conn, key)
        assert idempotency.purge_expired(conn) == 1


# --- ResourceLocking --------------------------------------------------------------------------------


def test_locking_takes_and_always_releases_the_target_lock(pipeline: Pipeline, stub: StubBroker) -> None:
    rt: Runtime = pipeline.runtime
    payload = _payload("e1")
    locking = ResourceLocking(rt.locks, rt.keys, rt.settings)
    key = rt.keys.lock("tenant-1", "e1", "acc")

    message = _delivery(pipeline, payload)
    locking.before_process_message(stub, message)
    assert rt.redis.get(key) is not None
    locking.after_process_message(stub, message, exception=RuntimeError("boom"))
    assert rt.redis.get(key) is None

    message = _delivery(pipeline, payload)
    locking.before_process_message(stub, message)
    locking.after_skip_message(stub, message)
    assert rt.redis.get(key) is None


def test_a_busy_lock_reenqueues_later_without_counting_a_failure(pipeline: Pipeline, stub: StubBroker) -> None:
    rt = pipeline.runtime
    payload = _payload("e1")
    held = rt.locks.acquire(rt.keys.lock("tenant-1", "e1", "acc"))
    locking = ResourceLocking(rt.locks, rt.keys, rt.settings)
    observed: list[str] = []
    locking.on_attempt = observed.append
    with pytest.raises(SkipMessage):
        locking.before_process_message(stub, _delivery(pipeline, payload, lock_waits=2))
    [again] = _queued(stub, "calendar.DQ")
    assert again.options["lock_waits"] == 3 and "retries" not in again.options
    assert again.args[0]["attempt"] == 1 and again.args[0]["job_id"] == payload.job_id
    assert observed == ["busy"]
    ctx = current_job()
    assert ctx is not None and ctx.outcome == "lock_busy" and ctx.lock is None

    with pytest.raises(MiddlewareFailure) as caught:
        locking.before_process_message(stub, _delivery(pipeline, payload, lock_waits=rt.settings.lock_max_waits))
    assert isinstance(caught.value.cause, LockBusy)
    assert held is not None and rt.locks.release(held)


# --- StaleVersionSkip -------------------------------------------------------------------------------


def test_stale_skips_jobs_for_superseded_or_already_synced_versions(pipeline: Pipeline, stub: StubBroker) -> None:
    entity, account, _ = _submitted(pipeline)
    pipeline.submit(None, entity_id=entity, title="v2")
    stale = StaleVersionSkip(pipeline.runtime)

    with pytest.raises(SkipMessage):
        stale.before_process_message(stub, _delivery(pipeline, _payload(entity, account, version=1)))
    stale.before_process_message(stub, _delivery(pipeline, _payload(entity, account, version=2, op="update")))
    ctx = current_job()
    assert ctx is not None and ctx.snapshot is not None and ctx.provider == "memory"

    with pipeline.runtime.db.direct_write() as tx:
        targets.record_synced(tx, TargetKey("tenant-1", entity, account), version=2, external_id="x", etag=None,
                              final_status="synced")  # fmt: skip
    with pytest.raises(SkipMessage):
        stale.before_process_message(stub, _delivery(pipeline, _payload(entity, account, version=2, op="update")))
    # A repair sync of the same version is the one exception.
    stale.before_process_message(
        stub, _delivery(pipeline, _payload(entity, account, version=2, op="update"), repair=True)
    )


# --- ScheduledRetries -------------------------------------------------------------------------------


def _retries(pipeline: Pipeline, stub: StubBroker) -> ScheduledRetries:
    stub.add_middleware(PayloadValidation())  # any middleware list will do; Retries needs the actor
    stub.actors["sync_calendar_event"] = pipeline.actors["sync_calendar_event"]
    return ScheduledRetries(pipeline.runtime)


def test_a_temporary_error_is_retried_on_schedule_as_the_next_attempt(pipeline: Pipeline, stub: StubBroker) -> None:
    entity, account, payload = _submitted(pipeline)
    retries = _retries(pipeline, stub)
    message = _delivery(pipeline, payload)
    retries.after_process_message(stub, message, exception=ProviderUnavailable("503"))
    assert not message.failed
    [again] = _queued(stub, "calendar.DQ")
    assert again.args[0]["attempt"] == 2 and again.options["retries"] == 1
    assert again.options["errors"][0]["error_class"] == "ProviderUnavailable"
    schedule, jitter = pipeline.settings.retry_schedule, pipeline.settings.retry_jitter
    delay = (again.options["eta"] - again.message_timestamp) / 1000
    assert delay >= schedule[0] * (1 - jitter) - 0.05
    ctx = current_job()
    assert ctx is not None and ctx.outcome == "retry_scheduled"
    row = pipeline.target(entity, account)
    assert row.error_class == "ProviderUnavailable" and row.due_at is not None


def test_a_rate_limit_hint_stretches_the_delay(pipeline: Pipeline, stub: StubBroker) -> None:
    retries = _retries(pipeline, stub)
    message = _delivery(pipeline, _payload("e1"))
    retries.after_process_message(stub, message, exception=RateLimited("429", retry_after=90))
    [again] = _queued(stub, "calendar.DQ")
    assert again.options["eta"] - again.message_timestamp >= 89_000


def test_a_permanent_error_and_exhausted_retries_fail_the_message(pipeline: Pipeline, stub: StubBroker) -> None:
    retries = _retries(pipeline, stub)
    message = _delivery(pipeline, _payload("e1"))
    retries.after_process_message(stub, message, exception=Forbidden("no"))
    assert message.failed and not _queued(stub, "calendar.DQ")

    message = _delivery(pipeline, _payload("e1"), retries=pipeline.settings.max_retries)
    retries.after_process_message(stub, message, exception=ProviderUnavailable("still down"))
    ctx = current_job()
    assert message.failed and ctx is not None and ctx.dead_letter_cause is DeadLetterCause.EXHAUSTED


def test_a_retry_that_cannot_be_enqueued_is_dead_lettered_not_lost(
    pipeline: Pipeline, stub: StubBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    retries = _retries(pipeline, stub)

    def down(*_args: Any, **_kwargs: Any) -> None:
        raise BrokerConnectionError("redis went away")  # type: ignore[no-untyped-call]

    monkeypatch.setattr(stub, "enqueue", down)
    message = _delivery(pipeline, _payload("e1"))
    retries.after_process_message(stub, message, exception=ProviderUnavailable("503"))
    ctx = current_job()
    assert message.failed and ctx is not None and ctx.dead_letter_cause is DeadLetterCause.ENQUEUE_FAILED


# --- DeadLetterRecorder -----------------------------------------------------------------------------


def test_the_recorder_retries_the_nack_while_the_database_is_down(
    pipeline: Pipeline, stub: StubBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorder = DeadLetterRecorder(pipeline.runtime)
    message = _delivery(pipeline, _payload("e1"))

    def db_down(*_args: Any, **_kwargs: Any) -> None:
        raise OSError("connection refused")

    monkeypatch.setattr(pipeline.runtime.db, "write", db_down)
    with pytest.raises(DeadLetterStoreUnavailable) as caught:
        recorder.before_nack(stub, message)
    # Dramatiq retries post-processing on broker connection errors, every few seconds, instead of losing it.
    assert isinstance(caught.value, BrokerConnectionError)

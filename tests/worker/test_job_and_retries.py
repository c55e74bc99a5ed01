"""The job and each middleware on its own: the job function and the hooks called directly with a real
database and Redis, and a StubBroker to capture what they enqueue."""

from __future__ import annotations

import contextlib
import datetime as dt
from typing import Any

import dramatiq
import pytest
from dramatiq.brokers.stub import StubBroker
from dramatiq.errors import BrokerConnectionError
from prometheus_client import REGISTRY
from sqlalchemy import QueuePool, update

from calsync.core.messaging.messages import sync_message
from calsync.core.model.errors import (
    Forbidden,
    InvalidPayload,
    LockBusy,
    ProviderUnavailable,
    RateLimited,
    TargetLocked,
)
from calsync.core.model.payload import JobPayload, new_payload
from calsync.core.model.vocabulary import DeadLetterCause, Outcome
from calsync.core.store import idempotency, targets
from calsync.core.store.pruning import Retention, prune
from calsync.core.store.schema import idempotency_records
from calsync.core.store.targets import TargetKey
from calsync.core.worker.delivery import Delivery, current_delivery
from calsync.core.worker.job import run_sync
from calsync.core.worker.middleware.dead_letters import DeadLetterRecorder, DeadLetterStoreUnavailable
from calsync.core.worker.middleware.retries import ScheduledRetries
from tests.support import Pipeline, wait_until


def _delivery(pipeline: Pipeline, payload: JobPayload | None, **options: Any) -> dramatiq.MessageProxy:
    message = sync_message(pipeline.settings.queue, payload or _payload("e1"))
    proxy = dramatiq.broker.MessageProxy(message.copy(options=options))
    delivery = Delivery(proxy.message_id, proxy.actor_name, proxy.queue_name, repair=bool(options.get("repair")),
                     payload=payload)  # fmt: skip
    current_delivery.set(delivery)
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


def _run(
    pipeline: Pipeline, stub: StubBroker, payload: JobPayload, *, repair: bool = False
) -> tuple[Outcome, Delivery]:
    delivery = Delivery("m-1", "sync_calendar_event", "calendar", repair=repair)
    return run_sync(pipeline.job_parts(stub), delivery, [payload.to_message_arg()], {}), delivery


def _lock_attempts(result: str) -> float:
    return REGISTRY.get_sample_value("calsync_lock_acquisitions_total", {"result": result}) or 0.0


# --- the job: payload ---------------------------------------------------------------------------------


def test_a_corrupt_payload_is_invalid_and_dead_lettered_at_once(pipeline: Pipeline, stub: StubBroker) -> None:
    parts = pipeline.job_parts(stub)
    delivery = Delivery("m-1", "sync_calendar_event", "calendar")
    with pytest.raises(InvalidPayload):
        run_sync(parts, delivery, [{"job_id": 1}], {})
    with pytest.raises(InvalidPayload, match="keyword arguments"):
        run_sync(parts, delivery, [_payload("e1").to_message_arg()], {"extra": 1})
    assert delivery.payload is None

    retries = _retries(pipeline, stub)
    message = _delivery(pipeline, None)
    retries.after_process_message(stub, message, exception=InvalidPayload("corrupt"))
    delivery = current_delivery.get()
    assert message.failed and not _queued(stub, "calendar.DQ")
    assert delivery is not None and delivery.dead_letter_cause is DeadLetterCause.INVALID_PAYLOAD
    assert delivery.outcome is Outcome.DEAD_LETTERED and isinstance(delivery.error, InvalidPayload)


def test_the_job_tells_its_delivery_the_payload_and_provider(pipeline: Pipeline, stub: StubBroker) -> None:
    entity, account, payload = _submitted(pipeline)
    outcome, delivery = _run(pipeline, stub, payload)
    assert outcome is Outcome.SUCCESS and delivery.payload == payload and delivery.provider == "memory"
    assert delivery.log_fields()["trace_id"] == "trace-unit"
    assert pipeline.target(entity, account).status == "synced"


# --- the job: idempotency -----------------------------------------------------------------------------


def test_a_job_whose_effect_is_recorded_is_done_without_a_call(pipeline: Pipeline, stub: StubBroker) -> None:
    _entity, _account, payload = _submitted(pipeline)
    with pipeline.clients.db.write() as tx:
        idempotency.record_success(tx, payload.idempotency_key, job_id="earlier", result={}, ttl_seconds=60)
    outcome, _ctx = _run(pipeline, stub, payload)
    assert outcome is Outcome.ALREADY_DONE and pipeline.provider.calls() == []


def test_an_expired_idempotency_record_no_longer_counts(pipeline: Pipeline) -> None:
    key = _payload("e1").idempotency_key
    db = pipeline.clients.db
    keep = Retention(batch=100, max_batches=10, dead_letters=0, cancelled_events=0)
    with db.write() as tx:
        idempotency.record_success(tx, key, job_id="old", result={}, ttl_seconds=60)
    with db.read() as conn:
        assert idempotency.succeeded(conn, key)
    assert prune(db, keep).purged["idempotency_records"] == 0  # the housekeeping pass keeps a live record
    with db.write() as conn:
        past = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=1)
        conn.execute(update(idempotency_records).values(expires_at=past))  # the TTL elapsed
        assert not idempotency.succeeded(conn, key)
    assert prune(db, keep).purged["idempotency_records"] == 1


def test_every_worker_thread_gets_a_kept_database_connection(pipeline: Pipeline) -> None:
    """Each thread's transaction, and a read nested in one (the outbox's), on connections the pool keeps."""
    db = pipeline.clients.db
    pool = db.engine.pool
    assert isinstance(pool, QueuePool)
    with contextlib.ExitStack() as held:
        for _ in range(pipeline.settings.worker_threads + 1):
            held.enter_context(db.read())
        assert pool.overflow() <= 0  # none opened beyond the pool's size (closed again at check-in)


# --- the job: the target lock -------------------------------------------------------------------------


def test_the_job_holds_the_target_lock_while_it_runs_and_always_frees_it(
    pipeline: Pipeline, stub: StubBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt = pipeline.clients
    entity, account, payload = _submitted(pipeline)
    key = rt.keys.lock("tenant-1", entity, account)
    held_during_call: list[bool] = []
    real_upsert = pipeline.provider.upsert

    def watched(*args: Any) -> Any:
        held_during_call.append(rt.redis.get(key) is not None)
        return real_upsert(*args)

    monkeypatch.setattr(pipeline.provider, "upsert", watched)
    pipeline.provider.add_fault(op="upsert", error="unavailable", times=1)
    acquired = _lock_attempts("acquired")
    with pytest.raises(ProviderUnavailable):
        _run(pipeline, stub, payload)
    # The release is sent without waiting for its answer: another connection may ask before Redis ran it.
    # Freed means well before the lock's TTL would have freed it.
    freed_within = rt.settings.lock_ttl / 4
    wait_until(lambda: rt.redis.get(key) is None, timeout=freed_within, what="the failed delivery to free the lock")
    outcome, _ctx = _run(pipeline, stub, payload)
    assert outcome is Outcome.SUCCESS
    wait_until(lambda: rt.redis.get(key) is None, timeout=freed_within, what="the delivery to free the lock")
    assert held_during_call == [True, True] and _lock_attempts("acquired") == acquired + 2


def test_a_busy_lock_defers_the_job_without_any_call(pipeline: Pipeline, stub: StubBroker) -> None:
    rt = pipeline.clients
    entity, account, payload = _submitted(pipeline)
    held = pipeline.app.locks.acquire(rt.keys.lock("tenant-1", entity, account))
    busy = _lock_attempts("busy")
    with pytest.raises(TargetLocked) as caught:
        _run(pipeline, stub, payload)
    assert not isinstance(caught.value, LockBusy)  # a deferral, not a failure
    assert _lock_attempts("busy") == busy + 1 and pipeline.provider.calls() == []
    assert held is not None and pipeline.app.locks.release(held)  # the job did not free someone else's lock


# --- the job: staleness -------------------------------------------------------------------------------


def test_superseded_or_already_synced_versions_are_stale(pipeline: Pipeline, stub: StubBroker) -> None:
    entity, account, _ = _submitted(pipeline)
    pipeline.submit(None, entity_id=entity, title="v2")
    assert _run(pipeline, stub, _payload(entity, account, version=1))[0] is Outcome.STALE

    with pipeline.clients.db.write() as tx:
        targets.record_synced(tx, TargetKey("tenant-1", entity, account), version=2, external_id="x", etag=None,
                              final_status="synced")  # fmt: skip
    assert _run(pipeline, stub, _payload(entity, account, version=2, op="update"))[0] is Outcome.STALE
    assert pipeline.provider.calls() == []
    # A repair sync of the same version is the one exception.
    outcome, _ctx = _run(pipeline, stub, _payload(entity, account, version=2, op="update"), repair=True)
    assert outcome is Outcome.SUCCESS and len(pipeline.provider.calls()) == 1


# --- ScheduledRetries: deferrals ----------------------------------------------------------------------


def test_a_deferred_job_is_reenqueued_later_without_using_an_attempt(pipeline: Pipeline, stub: StubBroker) -> None:
    retries = _retries(pipeline, stub)
    payload = _payload("e1")
    message = _delivery(pipeline, payload, lock_waits=2)
    retries.after_process_message(stub, message, exception=TargetLocked("busy"))
    assert not message.failed
    [again] = _queued(stub, "calendar.DQ")
    assert again.options["lock_waits"] == 3 and "retries" not in again.options and "errors" not in again.options
    assert again.args[0]["attempt"] == 1 and again.args[0]["job_id"] == payload.job_id
    delay = (again.options["eta"] - again.message_timestamp) / 1000
    settings = pipeline.settings
    assert settings.lock_retry_delay * (1 - settings.retry_jitter) - 0.05 <= delay
    delivery = current_delivery.get()
    assert (
        delivery is not None
        and delivery.outcome is Outcome.LOCK_BUSY
        and delivery.error is None
        and delivery.retry_in is not None
    )


def test_after_lock_max_waits_a_busy_lock_is_a_lock_busy_failure_on_the_schedule(
    pipeline: Pipeline, stub: StubBroker
) -> None:
    retries = _retries(pipeline, stub)
    waits = pipeline.settings.lock_max_waits
    message = _delivery(pipeline, _payload("e1"), lock_waits=waits)
    retries.after_process_message(stub, message, exception=TargetLocked("busy"))
    [again] = _queued(stub, "calendar.DQ")
    assert again.options["retries"] == 1 and again.args[0]["attempt"] == 2
    assert again.options["errors"][0]["error_class"] == "LockBusy"
    delivery = current_delivery.get()
    assert delivery is not None and delivery.outcome is Outcome.RETRY_SCHEDULED and isinstance(delivery.error, LockBusy)


def test_a_lock_busy_to_the_end_is_dead_lettered_as_exhausted_retries(pipeline: Pipeline, stub: StubBroker) -> None:
    entity, account, payload = _submitted(pipeline)
    retries = _retries(pipeline, stub)
    settings = pipeline.settings
    message = _delivery(pipeline, payload, lock_waits=settings.lock_max_waits, retries=len(settings.retry_schedule))
    retries.after_process_message(stub, message, exception=TargetLocked("busy"))
    delivery = current_delivery.get()
    assert message.failed and not _queued(stub, "calendar.DQ")
    assert (
        delivery is not None
        and delivery.dead_letter_cause is DeadLetterCause.EXHAUSTED
        and isinstance(delivery.error, LockBusy)
    )

    DeadLetterRecorder(pipeline.clients.db).before_nack(stub, message)
    [record] = pipeline.dead_letters()
    assert (record.cause, record.reason, record.error_class) == (DeadLetterCause.EXHAUSTED, "retries exhausted",
                                                                 "LockBusy")  # fmt: skip
    assert "lock still busy" in record.last_error and pipeline.target(entity, account).status == "failed"


@pytest.mark.parametrize(
    ("failure", "recorded"),
    # A deferral is no failure of its own: the broker's error is what the record explains.
    [(TargetLocked("busy"), BrokerConnectionError), (ProviderUnavailable("503"), ProviderUnavailable)],
    ids=["deferral", "retry"],
)
def test_a_retry_or_deferral_that_cannot_be_enqueued_is_owed_to_the_reconciler_not_lost(
    pipeline: Pipeline, stub: StubBroker, monkeypatch: pytest.MonkeyPatch, failure: Exception, recorded: type
) -> None:
    entity, account, payload = _submitted(pipeline)
    retries = _retries(pipeline, stub)

    def down(*_args: Any, **_kwargs: Any) -> None:
        raise BrokerConnectionError("redis went away")  # type: ignore[no-untyped-call]

    monkeypatch.setattr(stub, "enqueue", down)
    message = _delivery(pipeline, payload)
    retries.after_process_message(stub, message, exception=failure)
    delivery = current_delivery.get()
    assert not message.failed and delivery is not None and delivery.dead_letter_cause is None
    assert isinstance(delivery.error, recorded) and message.options["retries"] == 1
    row = pipeline.target(entity, account)
    assert (row.status, row.due_at, row.wait_reason) == ("pending", None, "not enqueued")
    with pipeline.clients.db.read() as conn:  # the reconciler's next pass enqueues it first
        assert [(r.event_id, r.account_id) for r in targets.overdue(conn, before=row.updated_at, limit=10)] == [
            (entity, account)
        ]


def test_a_retry_that_can_be_neither_enqueued_nor_marked_owed_is_dead_lettered_not_lost(
    pipeline: Pipeline, stub: StubBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    retries = _retries(pipeline, stub)

    def down(*_args: Any, **_kwargs: Any) -> None:
        raise BrokerConnectionError("redis went away")  # type: ignore[no-untyped-call]

    def database_down(*_args: Any, **_kwargs: Any) -> None:
        raise OSError("database went away")

    monkeypatch.setattr(stub, "enqueue", down)
    monkeypatch.setattr(targets, "mark_unqueued", database_down)
    message = _delivery(pipeline, _payload("e1"))
    retries.after_process_message(stub, message, exception=ProviderUnavailable("503"))
    delivery = current_delivery.get()
    assert message.failed and delivery is not None and delivery.dead_letter_cause is DeadLetterCause.ENQUEUE_FAILED


# --- ScheduledRetries: failures ------------------------------------------------------------------------


def _retries(pipeline: Pipeline, stub: StubBroker) -> ScheduledRetries:
    retries = ScheduledRetries(pipeline.clients.db, pipeline.settings)
    stub.add_middleware(retries)  # the actor's options (throws) need Retries on the broker
    stub.actors["sync_calendar_event"] = pipeline.actors["sync_calendar_event"]
    return retries


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
    delivery = current_delivery.get()
    assert delivery is not None and delivery.outcome is Outcome.RETRY_SCHEDULED
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

    message = _delivery(pipeline, _payload("e1"), retries=len(pipeline.settings.retry_schedule))
    retries.after_process_message(stub, message, exception=ProviderUnavailable("still down"))
    delivery = current_delivery.get()
    assert message.failed and delivery is not None and delivery.dead_letter_cause is DeadLetterCause.EXHAUSTED


# --- DeadLetterRecorder -----------------------------------------------------------------------------


def test_the_recorder_retries_the_nack_while_the_database_is_down(
    pipeline: Pipeline, stub: StubBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorder = DeadLetterRecorder(pipeline.clients.db)
    message = _delivery(pipeline, _payload("e1"))

    def db_down(*_args: Any, **_kwargs: Any) -> None:
        raise OSError("connection refused")

    monkeypatch.setattr(pipeline.clients.db, "write", db_down)
    with pytest.raises(DeadLetterStoreUnavailable) as caught:
        recorder.before_nack(stub, message)
    # Dramatiq retries post-processing on broker connection errors, every few seconds, instead of losing it.
    assert isinstance(caught.value, BrokerConnectionError)

"""The pipeline's state against the real Redis, database and (when present) RabbitMQ: ready, delayed,
in flight, oldest age, dead letters, targets, workers, and what a source failure looks like."""

from __future__ import annotations

import datetime as dt
import time
import uuid
from typing import Any

import dramatiq
import pytest
from prometheus_client import generate_latest

from calsync.core.messaging.messages import sync_message
from calsync.core.model.intake import INTAKE_JOB
from calsync.core.model.payload import SYNC_JOB, JobPayload, new_payload
from calsync.core.observability.exporter import exporter_registry
from calsync.core.observability.pipeline_state import QueueDepth, StateReader, ready_since
from calsync.core.redis import live_workers
from calsync.core.redis.keys import RedisKeys
from calsync.core.store import dead_letters, targets
from calsync.core.store.dead_letters import DeadLetterRecord
from calsync.core.store.targets import TargetKey
from tests.observability.conftest import parse
from tests.support import Pipeline, unchecked_clients, utcnow, wait_until


def _payload(entity: str = "evt-1", *, scheduled_at: dt.datetime | None = None) -> JobPayload:
    payload = new_payload(tenant_id="tenant-1", entity_id=entity, account_id="acc-1", operation="create",
                          version=1, trace_id="trace-state")  # fmt: skip
    return payload.model_copy(update={"scheduled_at": scheduled_at}) if scheduled_at else payload


def _message(queue: str, payload: JobPayload, *, created: float) -> dramatiq.Message[Any]:
    fresh = sync_message(queue, payload)
    return fresh.copy(message_timestamp=int(created * 1000))


def _queue(pipeline: Pipeline) -> QueueDepth:
    calendar, bulk, intake, webhooks, sweeps = StateReader(pipeline.clients).queues(time.time())
    settings = pipeline.settings
    assert (calendar.queue, bulk.queue, intake.queue, webhooks.queue, sweeps.queue) == (
        settings.queue, settings.effective_bulk_queue, settings.intake_queue, settings.webhook_queue,
        settings.effective_drift_queue)  # fmt: skip
    return calendar


def test_ready_and_in_flight_come_from_the_list_and_the_unacked_hash(pipeline: Pipeline) -> None:
    queue = pipeline.settings.queue
    for n in range(3):
        pipeline.broker.enqueue(sync_message(queue, _payload(f"evt-{n}")))
    reading = _queue(pipeline)
    assert (reading.queue, reading.ready, reading.delayed, reading.inflight) == (queue, 3, 0, 0)

    consumer = pipeline.broker.consume(queue, prefetch=1, timeout=100)
    try:
        fetched = wait_until(lambda: next(consumer), what="a message to be fetched")
        reading = _queue(pipeline)
        assert (reading.ready, reading.inflight) == (2, 1)
        consumer.ack(fetched)
        reading = _queue(pipeline)
        assert (reading.ready, reading.inflight) == (2, 0)
    finally:
        consumer.close()


def test_delayed_messages_are_counted_in_the_delay_hash(pipeline: Pipeline) -> None:
    queue = pipeline.settings.queue
    pipeline.broker.enqueue(sync_message(queue, _payload("evt-later")), delay=60_000)
    pipeline.broker.enqueue(sync_message(queue, _payload("evt-later-2")), delay=60_000)
    reading = _queue(pipeline)
    assert (reading.ready, reading.delayed, reading.inflight, reading.oldest_age_seconds) == (0, 2, 0, 0)


def test_the_oldest_age_counts_from_when_the_head_message_became_ready(pipeline: Pipeline) -> None:
    queue = pipeline.settings.queue
    now = time.time()
    created = now - 120
    old = dt.datetime.fromtimestamp(created, dt.UTC)
    pipeline.broker.enqueue(_message(queue, _payload("evt-old", scheduled_at=old), created=created))
    pipeline.broker.enqueue(sync_message(queue, _payload("evt-new")))
    age = _queue(pipeline).oldest_age_seconds
    assert age is not None and 120 <= age < 150


def test_a_retried_message_is_as_old_as_its_retry_not_its_creation(pipeline: Pipeline) -> None:
    queue = pipeline.settings.queue
    now = time.time()
    due = dt.datetime.fromtimestamp(now - 5, dt.UTC)  # the retry became due 5 s ago; the job is 10 min old
    pipeline.broker.enqueue(_message(queue, _payload("evt-retry", scheduled_at=due), created=now - 600))
    age = _queue(pipeline).oldest_age_seconds
    assert age is not None and 5 <= age < 35


def test_ready_since_takes_the_latest_of_creation_eta_and_scheduled_at() -> None:
    assert ready_since({"message_timestamp": 1_000_000}) == 1000
    assert ready_since({"message_timestamp": 1_000_000, "options": {"eta": 1_500_000}}) == 1500
    scheduled = {"scheduled_at": "1970-01-01T00:30:00+00:00"}
    assert ready_since({"message_timestamp": 1_000_000, "args": [scheduled], "options": {"eta": 1_500_000}}) == 1800
    assert ready_since({"args": [{"scheduled_at": "not a date"}]}) is None


def _dead_letter(pipeline: Pipeline, *, reason: str, failed_at: dt.datetime, job_type: str = SYNC_JOB) -> None:
    record = DeadLetterRecord(
        job_id=f"job_{uuid.uuid4().hex}", job_type=job_type, message_id=None, queue="calendar",
        tenant_id="tenant-1", entity_id="evt-1", account_id="acc-1", idempotency_key=None,
        trace_id=None, payload={}, attempts=1, reason=reason, error_class="Forbidden",
        last_error="no", error_history=[], first_failed_at=failed_at, failed_at=failed_at,
    )  # fmt: skip
    with pipeline.clients.db.write() as conn:
        dead_letters.insert(pipeline.clients.db, conn, record)


def test_open_dead_letters_by_job_type_and_reason_and_the_oldest_age(pipeline: Pipeline) -> None:
    now = utcnow()
    _dead_letter(pipeline, reason="forbidden", failed_at=now - dt.timedelta(seconds=300))
    _dead_letter(pipeline, reason="forbidden", failed_at=now - dt.timedelta(seconds=30))
    _dead_letter(pipeline, reason="retries exhausted", failed_at=now, job_type="reconcile")
    _dead_letter(pipeline, reason="invalid payload", failed_at=now - dt.timedelta(days=2))
    with pipeline.clients.db.write() as conn:
        [discarded] = dead_letters.find(conn, dead_letters.DeadLetterFilter(reason="invalid payload"))
        dead_letters.mark_discarded(conn, discarded.id, note="closed records do not count")
    store = StateReader(pipeline.clients).store(time.time())
    assert store.dead_letters.open == 3
    assert store.dead_letters.open_by_job_type == {
        SYNC_JOB: 2,
        INTAKE_JOB: 0,
        "reconcile": 1,
        "dispatch_webhook": 0,
        "deliver_webhook": 0,
        "sweep_account": 0,
    }
    assert store.dead_letters.open_by_reason == {"forbidden": 2, "retries exhausted": 1}
    assert 300 <= store.dead_letters.oldest_age_seconds < 330


def test_targets_by_status_and_the_most_overdue_pending_one(pipeline: Pipeline) -> None:
    account = pipeline.account()
    late, _fresh, broken = (pipeline.submit([account], title=t).entity_id for t in ("late", "fresh", "broken"))
    with pipeline.clients.db.write() as conn:
        late_key = TargetKey("tenant-1", late, account)
        targets.postpone(conn, late_key, due_at=utcnow() - dt.timedelta(seconds=100), job_id="re-enqueued")
        targets.record_failed(conn, TargetKey("tenant-1", broken, account), version=1, error_class="X", message="x")
    store = StateReader(pipeline.clients).store(time.time())
    assert store.targets.by_status == {"pending": 2, "failed": 1}
    assert 100 <= store.targets.pending_oldest_age_seconds < 130


def test_active_workers_are_the_unexpired_heartbeat_keys_of_this_namespace(pipeline: Pipeline) -> None:
    client, keys = pipeline.clients.redis, pipeline.clients.keys
    other = RedisKeys(f"other-{keys.namespace}")
    live_workers.renew(client, keys, "pod-a:7", "{}", ttl_ms=60_000)
    live_workers.renew(client, keys, "pod-b:7", "{}", ttl_ms=60_000)
    live_workers.renew(client, keys, "pod-c:7", "{}", ttl_ms=50)
    live_workers.renew(client, keys, "pod-e:7", "{}", ttl_ms=60_000)
    live_workers.remove(client, keys, "pod-e:7")  # stopped on purpose
    live_workers.renew(client, other, "pod-d:7", "{}", ttl_ms=60_000)
    try:
        reader = StateReader(pipeline.clients)
        wait_until(lambda: [w.worker for w in reader.read().workers or []] == ["pod-a:7", "pod-b:7"],
                   what="the short-lived heartbeat to expire")  # fmt: skip
        assert client.smembers(keys.workers()) == {b"pod-a:7", b"pod-b:7"}  # the expired name dropped by the read
    finally:
        live_workers.remove(client, other, "pod-d:7")


def test_reading_the_workers_does_not_walk_the_other_keys(pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch) -> None:
    """The workers are found through their set: a Redis full of other keys costs no SCAN (nor KEYS)."""
    client, keys = pipeline.clients.redis, pipeline.clients.keys
    live_workers.renew(client, keys, "pod-a:7", "{}", ttl_ms=60_000)
    client.mset({keys.worker_heartbeat(f"unlisted-{n}"): "{}" for n in range(3)})  # keys no worker listed
    commands: list[str] = []
    send = client.execute_command

    def recorded(*args: Any, **options: Any) -> Any:
        commands.append(str(args[0]).upper())
        return send(*args, **options)

    monkeypatch.setattr(client, "execute_command", recorded)
    workers = StateReader(pipeline.clients).read().workers or []
    assert [w.worker for w in workers] == ["pod-a:7"]
    assert commands and not {"SCAN", "KEYS"} & set(commands), commands


def test_the_exporter_reports_a_source_it_cannot_read_and_keeps_the_others(settings_factory: Any) -> None:
    settings = settings_factory(database_url="postgresql+psycopg://postgres@127.0.0.1:1/nowhere")
    clients = unchecked_clients(settings)
    try:
        reading = StateReader(clients).read()
        assert set(reading.errors) == {"database"} and reading.store is None
        page = parse(generate_latest(exporter_registry(StateReader(clients))).decode())
        up = [page.value("calsync_exporter_source_up", source=s) for s in ("broker", "database", "redis")]
        assert up == [1, 0, 1]
        assert page.value("calsync_queue_ready_messages", queue=settings.queue) == 0
        assert not page.series("calsync_sync_targets") and not page.series("calsync_dead_letters_open")
    finally:
        clients.close()


@pytest.mark.both_brokers
def test_rabbitmq_reports_only_the_ready_count(pipeline: Pipeline, broker_kind: str) -> None:
    account = pipeline.account()
    pipeline.submit([account], title="one")
    pipeline.submit([account], title="two")
    reading = _queue(pipeline)
    assert reading.ready == 2
    page = parse(generate_latest(exporter_registry(StateReader(pipeline.clients))).decode())
    present = {name: bool(page.series(name)) for name in (
        "calsync_queue_ready_messages", "calsync_queue_delayed_messages", "calsync_queue_inflight_messages",
        "calsync_queue_oldest_message_age_seconds")}  # fmt: skip
    if broker_kind == "rabbitmq":
        assert (reading.delayed, reading.inflight, reading.oldest_age_seconds) == (None, None, None)
        assert present == {name: name == "calsync_queue_ready_messages" for name in present}
        missing = pipeline.settings.model_copy(update={"queue": f"missing{uuid.uuid4().hex[:8]}"})
        clients = unchecked_clients(missing)
        try:
            undeclared, _bulk, intake, _webhooks, _sweeps = StateReader(clients).queues(time.time())
            assert undeclared.ready == 0 and undeclared.queue == missing.queue and intake.queue == missing.intake_queue
        finally:
            clients.close()
    else:
        assert all(present.values())

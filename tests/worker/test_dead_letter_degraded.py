"""A dead letter the database refuses for a data reason is stored degraded, once, instead of retried forever;
and a rejected payload's record and log lines still name the ids it carried."""

from __future__ import annotations

import logging
from typing import Any

import dramatiq
import pytest
from dramatiq.brokers.stub import StubBroker

from calsync.core.messaging.quarantine import Arrival, Quarantined
from calsync.core.model.vocabulary import Refusal
from calsync.core.worker.middleware.dead_letters import DeadLetterRecorder
from tests.support import Pipeline


def _proxy(**fields: Any) -> dramatiq.MessageProxy:
    message = dramatiq.Message(**{"queue_name": "calendar", "actor_name": "sync_calendar_event", "args": (),
                                  "kwargs": {}, "options": {}, **fields})  # fmt: skip
    return dramatiq.MessageProxy(message)


@pytest.mark.postgresql_only
def test_a_record_too_big_for_its_columns_is_stored_degraded(pipeline: Pipeline, stub: StubBroker) -> None:
    recorder = DeadLetterRecorder(pipeline.clients.db)
    raw = {"job_id": "job-big", "tenant_id": "t" * 400, "note": "n" * 100_000}
    message = _proxy(queue_name="q" * 300, actor_name="a" * 100, args=(raw,), options={"retries": 10**12})
    recorder.before_nack(stub, message)  # raises nothing: PostgreSQL refused the record, the degraded one fits

    [record] = pipeline.dead_letters()
    assert record.job_id == "job-big" and record.job_type == "a" * 64 and record.queue == "q" * 128
    assert record.tenant_id == "t" * 128 and record.attempts == 2**31 - 1
    assert "stored degraded: DataError" in record.last_error
    assert record.payload["degraded"] is True and record.payload["size"] > 100_000


@pytest.mark.postgresql_only
def test_a_quarantine_record_the_database_refuses_is_stored_degraded(pipeline: Pipeline) -> None:
    recorder = DeadLetterRecorder(pipeline.clients.db)
    arrival = Arrival("redis", "calendar", "rid-1", "LPOP x:calendar", unique_id=True, details={"hint": "h"})
    doc = {"actor_name": "sync_calendar_event", "args": [{"job_id": "j1", "trace_id": "tr\x00-1"}]}
    recorder.quarantine(Quarantined(Refusal.WRONG_QUEUE, "queue_name 'other'", b"{}", 2, arrival, doc))
    recorder.quarantine(Quarantined(Refusal.WRONG_QUEUE, "queue_name 'other'", b"{}", 2, arrival, doc))  # redelivered

    [record] = pipeline.dead_letters(kind="quarantined")
    assert record.reason == "quarantined: wrong queue" and record.trace_id == "tr\\0-1"  # PostgreSQL refused the NUL
    assert record.raw_body == b"{}" and "stored degraded: DataError" in record.last_error
    assert record.origin is not None and record.origin["broker_message_id"] == "rid-1"


def test_a_rejected_payload_names_its_ids_in_the_record_and_the_log(
    pipeline: Pipeline, caplog: pytest.LogCaptureFixture
) -> None:
    account = pipeline.account()
    bad = {"job_id": "job-bad-1", "trace_id": "trace-bad-1", "tenant_id": "tenant-1", "entity_id": "evt-9",
           "account_id": account, "target_version": 2**31}  # fmt: skip
    caplog.set_level(logging.INFO)
    with pipeline.worker():
        pipeline.broker.enqueue(dramatiq.Message(queue_name=pipeline.settings.queue, actor_name="sync_calendar_event",
                                                 args=(bad,), kwargs={}, options={}))  # fmt: skip
        from tests.support import wait_until

        [record] = wait_until(pipeline.dead_letters, what="the rejected payload in the DLQ")
    assert (record.job_id, record.trace_id, record.entity_id, record.account_id) == (
        "job-bad-1", "trace-bad-1", "evt-9", account)  # fmt: skip
    assert "target_version" in record.last_error and record.reason == "invalid payload"
    [line] = [r for r in caplog.records if r.name == "calsync.jobs" and "dead_lettered" in r.getMessage()]
    fields = line.fields  # type: ignore[attr-defined]
    assert {fields[k] for k in ("job_id", "trace_id", "tenant_id", "entity_id", "account_id")} == {
        "job-bad-1", "trace-bad-1", "tenant-1", "evt-9", account}  # fmt: skip

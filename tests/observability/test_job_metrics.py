"""Worker metrics recorded in-process (real worker threads, in-memory values): the dead-letter reason is
the DLQ record's, messages for unknown actors are counted too, and provider calls are classified."""

from __future__ import annotations

import contextlib
from typing import Any

import dramatiq
import pytest
from dramatiq.middleware.time_limit import TimeLimitExceeded
from prometheus_client import REGISTRY

from calsync.core.model.errors import Forbidden, ProviderUnavailable
from calsync.core.model.payload import SYNC_JOB
from calsync.core.model.vocabulary import DeadLetterCause
from calsync.core.producer.reconcile import reconcile
from calsync.core.worker.metrics import provider_request, status_class
from tests.support import Pipeline, wait_until


def _sample(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_a_job_that_exhausts_its_retries_counts_each_retry_and_one_dead_letter(pipeline: Pipeline) -> None:
    retries = {"job_type": SYNC_JOB, "provider": "memory", "error_class": "ProviderUnavailable"}
    exhausted = {"job_type": SYNC_JOB, "reason": "retries exhausted"}
    before = (_sample("calsync_job_retries_total", **retries), _sample("calsync_dead_letters_total", **exhausted))
    pipeline.provider.add_fault(op="upsert", error="unavailable")
    account = pipeline.account()
    with pipeline.worker():
        receipt = pipeline.submit([account])
        pipeline.wait_target(receipt.entity_id, account, "failed")
        wait_until(
            lambda: _sample("calsync_dead_letters_total", **exhausted) == before[1] + 1, what="the dead letter metric"
        )
    [record] = pipeline.dead_letters()
    assert record.reason == "retries exhausted" and record.cause is DeadLetterCause.EXHAUSTED
    assert _sample("calsync_job_retries_total", **retries) == before[0] + len(pipeline.settings.retry_schedule)


def test_a_message_for_an_unknown_actor_is_counted_as_dead_lettered(pipeline: Pipeline) -> None:
    # Quarantined at the consumer (tests/integration/test_poison.py): a dead letter, never a job.
    unknown = {"job_type": "no_such_actor", "reason": "quarantined: unknown actor"}
    before = _sample("calsync_dead_letters_total", **unknown)
    message: dramatiq.Message[Any] = dramatiq.Message(
        queue_name=pipeline.settings.queue, actor_name="no_such_actor", args=(), kwargs={}, options={}
    )
    with pipeline.worker():
        pipeline.broker.enqueue(message)
        wait_until(lambda: pipeline.dead_letters(job_type="no_such_actor"), what="the dead letter record")
        wait_until(lambda: _sample("calsync_dead_letters_total", **unknown) == before + 1, what="the metric")
    [record] = pipeline.dead_letters(job_type="no_such_actor")
    assert (record.kind, record.reason) == ("quarantined", "quarantined: unknown actor")


def test_a_retry_that_cannot_be_enqueued_is_owed_to_the_reconciler_not_dead_lettered(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    failed = {"job_type": SYNC_JOB, "reason": "retry enqueue failed"}
    before = _sample("calsync_dead_letters_total", **failed)
    real_enqueue = pipeline.broker.enqueue

    def retries_refused(message: dramatiq.Message[Any], *, delay: int | None = None) -> dramatiq.Message[Any]:
        if "retries" in message.options:  # the next attempt of a failed job; first deliveries go through
            raise BrokenPipeError("broker connection lost")
        return real_enqueue(message, delay=delay)

    monkeypatch.setattr(pipeline.broker, "enqueue", retries_refused)
    pipeline.provider.add_fault(op="upsert", error="unavailable", times=1)
    account = pipeline.account()
    with pipeline.worker():
        receipt = pipeline.submit([account])
        wait_until(lambda: pipeline.target(receipt.entity_id, account).wait_reason == "not enqueued", what="owed")
        assert reconcile(pipeline.clients, older_than=0).requeued  # its next pass: a first delivery again
        row = pipeline.wait_target(receipt.entity_id, account, "synced")
    assert row.synced_version == 1 and pipeline.dead_letters() == []
    assert _sample("calsync_dead_letters_total", **failed) == before
    assert pipeline.outcomes() == {"retry_scheduled": 1, "success": 1}


@pytest.mark.parametrize(
    ("failure", "expected"),
    [
        (None, "ok"),
        (ProviderUnavailable("503"), "temporary_error"),
        (TimeLimitExceeded(), "temporary_error"),
        (ValueError("an adapter bug"), "temporary_error"),
        (Forbidden("no"), "permanent_error"),
    ],
)
def test_provider_calls_are_classified_like_the_retry_policy(failure: BaseException | None, expected: str) -> None:
    assert failure is None or status_class(failure) == expected
    labels = {"provider": "google", "operation": "update"}
    before = _sample("calsync_provider_requests_total", **labels, status_class=expected)
    count = _sample("calsync_provider_request_duration_seconds_count", **labels)
    expectation = pytest.raises(type(failure)) if failure is not None else contextlib.nullcontext()
    with expectation, provider_request("google", "update"):
        if failure is not None:
            raise failure
    assert _sample("calsync_provider_requests_total", **labels, status_class=expected) == before + 1
    assert _sample("calsync_provider_request_duration_seconds_count", **labels) == count + 1

"""An operator's cancel that lands between a job's early read and its lock: the job reads again and skips."""

from __future__ import annotations

from typing import Any

import pytest
from dramatiq.brokers.stub import StubBroker

from calsync.core.model.payload import new_payload
from calsync.core.model.vocabulary import Outcome
from calsync.core.producer.job_cancel import cancel_job
from calsync.core.redis.locks import OwnedLock
from calsync.core.worker.delivery import Delivery
from calsync.core.worker.job import run_sync
from tests.support import Pipeline


def test_a_job_that_read_before_the_cancel_reads_again_under_the_lock(
    pipeline: Pipeline, stub: StubBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    account = pipeline.account()
    receipt = pipeline.submit([account])
    [job_id] = receipt.job_ids
    payload = new_payload(tenant_id="tenant-1", entity_id=receipt.entity_id, account_id=account, operation="create",
                          version=1, trace_id="trace-race").model_copy(update={"job_id": job_id})  # fmt: skip
    real_acquire = pipeline.app.locks.acquire

    def cancelled_first(key: str, **kw: Any) -> OwnedLock | None:
        assert cancel_job(pipeline.clients, "tenant-1", job_id) is not None  # after the job's early read
        return real_acquire(key, **kw)

    monkeypatch.setattr(pipeline.app.locks, "acquire", cancelled_first)
    delivery = Delivery("m-1", "sync_calendar_event", "calendar")
    outcome = run_sync(pipeline.job_parts(stub), delivery, [payload.to_message_arg()], {})
    assert outcome is Outcome.STALE
    assert pipeline.provider.calls() == []
    assert pipeline.target(receipt.entity_id, account).status == "failed"

"""The retry middleware re-enqueues attempt n+1 after exactly ``RETRY_SCHEDULE[n-1]`` ± ``RETRY_JITTER``.

Read from what the worker hands the real broker (``broker.enqueue(message, delay=...)``), not from
timings, so the window can be checked exactly, both ends.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from tests.spies import EnqueueSpy
from tests.support import Pipeline, wait_until

pytestmark = pytest.mark.integration

SCHEDULE = (0.1, 0.2, 0.3)
JITTER = 0.2
JOBS = 8


def test_each_retry_waits_its_schedule_entry_spread_by_the_jitter(
    settings_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    pipeline = Pipeline(settings_factory(retry_schedule=SCHEDULE, retry_jitter=JITTER))
    try:
        spy = EnqueueSpy(pipeline.broker, monkeypatch)
        account = pipeline.account()
        pipeline.provider.add_fault(error="unavailable")
        receipts = [pipeline.submit([account], title=f"job {n}") for n in range(JOBS)]
        with pipeline.worker():
            wait_until(lambda: len(pipeline.dead_letters()) == JOBS, what="every job to exhaust its retries")
        retries = spy.retries()
        job_ids = {job_id for receipt in receipts for job_id in receipt.job_ids}
        assert {job for job, _ in retries} == job_ids
        assert sorted({attempt for _, attempt in retries}) == [2, 3, 4]  # one retry per schedule entry, no more

        offsets: list[float] = []
        for (job_id, attempt), sent in retries.items():
            base = SCHEDULE[attempt - 2] * 1000  # the retry of failed attempt k waits entry k-1
            assert sent.delay is not None
            low, high = math.floor(base * (1 - JITTER)), math.ceil(base * (1 + JITTER))
            assert low <= sent.delay <= high, f"{job_id} attempt {attempt}: {sent.delay} ms outside [{low}, {high}]"
            offsets.append(sent.delay / base - 1)
        # Jitter really spreads the delays: 24 uniform draws on ±20% span less than half of it once in a million.
        assert max(offsets) - min(offsets) > JITTER, f"delays not spread by the jitter: {sorted(offsets)}"
        for attempt in (2, 3, 4):
            delays = {sent.delay for (_, a), sent in retries.items() if a == attempt}
            assert len(delays) > 1, f"every retry of attempt {attempt - 1} waited exactly {delays}"
    finally:
        pipeline.close()


def test_a_waiting_retry_moves_the_targets_due_time_by_its_delay(settings_factory: Any) -> None:
    """The reconciler re-enqueues pending targets that are overdue: a retry that is only waiting must not be."""
    pipeline = Pipeline(settings_factory(retry_schedule=(3.0,), retry_jitter=0.1))
    try:
        account = pipeline.account()
        pipeline.provider.add_fault(error="unavailable", times=1)
        receipt = pipeline.submit([account])
        with pipeline.worker():
            row = wait_until(
                lambda: (r := pipeline.target(receipt.entity_id, account)).last_error and r, what="the retry noted"
            )
            [failed] = pipeline.provider.calls()
        assert row.due_at is not None
        waits = row.due_at.timestamp() - failed.at
        assert 3.0 * 0.9 - 0.1 <= waits <= 3.0 * 1.1 + 1.0, f"due {waits:.2f}s after the failure, not after ~3s"
    finally:
        pipeline.close()


def test_the_error_history_keeps_the_newest_entries(settings_factory: Any) -> None:
    pipeline = Pipeline(settings_factory(retry_schedule=(0.01,) * 22, retry_jitter=0))
    try:
        account = pipeline.account()
        pipeline.provider.add_fault(error="unavailable")
        pipeline.submit([account])
        with pipeline.worker():
            [record] = wait_until(pipeline.dead_letters, what="the dead letter after 23 attempts")
        assert record.attempts == 23
        assert [h["attempt"] for h in record.error_history] == list(range(4, 24))  # the last 20 of 23
    finally:
        pipeline.close()

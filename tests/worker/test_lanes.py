"""A worker consumes both lanes, each with its own consumer and prefetch: a flood queued on the bulk lane does not
stand in front of another tenant's job, and a retry stays on the lane it came from (docs/notes/fairness.md).

Order, not time: the provider's call log says how many flood jobs ran before the small tenant's one.
"""

from __future__ import annotations

from typing import Any

import pytest

from calsync.actors.cli.ops import worker_command
from calsync.actors.cli.shell import CliState
from tests.spies import EnqueueSpy
from tests.support import Pipeline, wait_until

FLOOD = 60
THRESHOLD = 5


def _flood_then_one(pipeline: Pipeline) -> tuple[list[str], str]:
    big = [pipeline.account("big", f"big-{n}") for n in range(FLOOD)]
    small = pipeline.account("small", "small-1")
    pipeline.submit(big, tenant="big", title="Flood")  # one fan-out: FLOOD jobs queued before the small change
    pipeline.submit([small], tenant="small", title="Small", entity_id="evt-small")
    return big, small


def _synced(pipeline: Pipeline, tenant: str, entity_id: str, account_id: str) -> None:
    wait_until(lambda: pipeline.target(entity_id, account_id, tenant=tenant).status == "synced", timeout=60,
               what=f"{tenant}'s target {entity_id}/{account_id} to be synced")  # fmt: skip


def _flood_calls_before(pipeline: Pipeline, small: str) -> int:
    calls = pipeline.provider.calls()
    return next(n for n, call in enumerate(calls) if call.account_id == small)


@pytest.mark.both_brokers
def test_with_a_flood_on_the_bulk_lane_another_tenants_job_runs_long_before_the_flood_drains(
    settings_factory: Any,
) -> None:
    pipeline = Pipeline(settings_factory(bulk_threshold=THRESHOLD))
    try:
        _, small = _flood_then_one(pipeline)
        with pipeline.worker(threads=1):
            _synced(pipeline, "small", "evt-small", small)
            pipeline.wait_idle(timeout=60)  # and the same worker drains the bulk lane
        # Ahead of it on the normal lane: THRESHOLD flood jobs; the bulk lane's consumer only keeps its prefetch
        # (2 x threads) in the shared work queue, so the rest of the flood waits in Redis.
        assert _flood_calls_before(pipeline, small) < FLOOD // 2
    finally:
        pipeline.close()


def test_without_the_bulk_lane_the_same_job_waits_for_the_whole_flood(settings_factory: Any) -> None:
    pipeline = Pipeline(settings_factory(bulk_threshold=0))
    try:
        _, small = _flood_then_one(pipeline)
        with pipeline.worker(threads=1):
            _synced(pipeline, "small", "evt-small", small)
        assert _flood_calls_before(pipeline, small) == FLOOD  # one FIFO queue: the guard above measures something
    finally:
        pipeline.close()


def test_a_retry_stays_on_the_bulk_lane(settings_factory: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    pipeline = Pipeline(settings_factory(bulk_threshold=1))
    try:
        first, second = (pipeline.account("big", f"big-{n}") for n in range(2))
        pipeline.provider.add_fault(account_id=second, times=1)  # one temporary failure
        spy = EnqueueSpy(pipeline.broker, monkeypatch)
        receipt = pipeline.submit([first, second], tenant="big")
        with pipeline.worker(threads=2):
            _synced(pipeline, "big", receipt.entity_id, second)
        bulk = pipeline.settings.effective_bulk_queue
        assert [s.message.queue_name for s in spy.sent if s.delay is None][:2] == [pipeline.settings.queue, bulk]
        (retry,) = spy.retries().values()
        assert (retry.payload.account_id, retry.message.queue_name) == (second, bulk)
    finally:
        pipeline.close()


def test_calsync_worker_consumes_both_lanes_and_the_intake_queue(settings_factory: Any) -> None:
    state = CliState()
    state.settings = settings_factory(bulk_queue="overflow")
    command = worker_command(state, 1, 2)
    queues = command[command.index("--queues") + 1 : command.index("--worker-shutdown-timeout")]
    assert queues == [state.settings.queue, "overflow", state.settings.intake_queue, state.settings.webhook_queue,
                      state.settings.effective_drift_queue]  # fmt: skip

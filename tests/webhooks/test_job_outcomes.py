"""A webhook delivery's job run is logged and counted as what it was: dead-lettered, a retry scheduled, or a
success, never "success" for a delivery that failed (its one log line names the delivery and the reason)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support import wait_until
from tests.webhooks.conftest import Hooks
from tests.webhooks.receiver import Receiver, serve

pytestmark = pytest.mark.integration


@pytest.fixture
def gone() -> Iterator[Receiver]:
    """Answers 410: a permanent refusal."""
    yield from serve(Receiver(answer=lambda n: 410))


@pytest.fixture
def flaky() -> Iterator[Receiver]:
    """Answers 503 once, then 200."""
    yield from serve(Receiver(answer=lambda n: 503 if n == 1 else 200))


def _lines(caplog: pytest.LogCaptureFixture, endpoint_id: str) -> list[dict[str, Any]]:
    fields = [getattr(r, "fields", {}) for r in caplog.records if r.name == "calsync.jobs"]
    return [f for f in fields if f.get("endpoint_id") == endpoint_id]


def _job_lines(hooks: Hooks, receiver: Receiver, caplog: pytest.LogCaptureFixture, runs: int) -> list[dict[str, Any]]:
    """One synced event notified to ``receiver``: the job lines of its delivery once ``runs`` of them are counted."""
    caplog.set_level(logging.INFO, logger="calsync.jobs")
    pipeline = hooks.pipeline
    endpoint_id = hooks.endpoint(receiver)
    with pipeline.worker():
        pipeline.submit([pipeline.account()])
        wait_until(lambda: len(_lines(caplog, endpoint_id)) == runs, what="the delivery's job lines")
        # counted after the line is written: the sync, the dispatch and each run of the delivery
        wait_until(lambda: sum(pipeline.outcomes().values()) == 2 + runs, what="every run counted")
    return _lines(caplog, endpoint_id)


def test_a_dead_lettered_delivery_is_logged_and_counted_as_dead_lettered(
    hooks: Hooks, gone: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    [line] = _job_lines(hooks, gone, caplog, 1)
    assert (line["outcome"], line["reason"], line["status"]) == ("dead_lettered", "webhook answer refused", 410)
    assert [r.reason for r in hooks.pipeline.dead_letters(kind="webhook")] == ["webhook answer refused"]
    assert hooks.pipeline.outcomes() == {"success": 2, "dead_lettered": 1}  # the sync and dispatch jobs, the delivery


def test_a_retried_delivery_is_logged_as_a_retry_then_a_success(
    hooks: Hooks, flaky: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    first, second = _job_lines(hooks, flaky, caplog, 2)
    assert (first["outcome"], first["status"], second["outcome"]) == ("retry_scheduled", 503, "success")
    assert first["retry_in_seconds"] > 0 and first["attempt"] == 1 and second["attempt"] == 2
    assert hooks.pipeline.outcomes() == {"success": 3, "retry_scheduled": 1}

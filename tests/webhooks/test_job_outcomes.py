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


def test_a_dead_lettered_delivery_is_logged_and_counted_as_dead_lettered(
    hooks: Hooks, gone: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="calsync.jobs")
    pipeline = hooks.pipeline
    endpoint_id = hooks.endpoint(gone)
    with pipeline.worker():
        pipeline.submit([pipeline.account()])
        wait_until(lambda: _lines(caplog, endpoint_id), what="the delivery's job line")
        wait_until(lambda: pipeline.outcomes().get("dead_lettered") == 1, what="the dead letter counted")
    [line] = _lines(caplog, endpoint_id)
    assert (line["outcome"], line["reason"], line["status"]) == ("dead_lettered", "webhook answer refused", 410)
    assert [r.reason for r in pipeline.dead_letters(kind="webhook")] == ["webhook answer refused"]
    assert pipeline.outcomes() == {"success": 2, "dead_lettered": 1}  # the sync and dispatch jobs; the delivery


def test_a_retried_delivery_is_logged_as_a_retry_then_a_success(
    hooks: Hooks, flaky: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="calsync.jobs")
    pipeline = hooks.pipeline
    endpoint_id = hooks.endpoint(flaky)
    with pipeline.worker():
        pipeline.submit([pipeline.account()])
        wait_until(lambda: len(_lines(caplog, endpoint_id)) == 2, what="both attempts' job lines")
    first, second = _lines(caplog, endpoint_id)
    assert (first["outcome"], first["status"], second["outcome"]) == ("retry_scheduled", 503, "success")
    assert first["retry_in_seconds"] > 0 and first["attempt"] == 1 and second["attempt"] == 2

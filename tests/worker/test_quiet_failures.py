"""What a failure writes to the log: a dead-lettered permanent error is one warning line with its ids and
reason (no traceback, nothing at error level); an unexpected exception keeps its traceback, once."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from calsync.core.config.logging import JsonFormatter
from calsync.core.config.settings import Settings
from calsync.core.model.calendar import Account, EventState, ExternalRef, Target
from calsync.providers.memory import MemoryProvider
from tests.support import Pipeline


class _Lines(logging.Handler):
    """Every calsync and Dramatiq record, formatted as the worker writes it (job fields included)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(JsonFormatter())
        self.lines: list[dict[str, Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.name.startswith(("calsync", "dramatiq")):
            self.lines.append(json.loads(self.format(record)))

    def at(self, *levels: str) -> list[dict[str, Any]]:
        return [line for line in self.lines if line["level"] in levels]


@pytest.fixture
def lines() -> Iterator[_Lines]:
    handler, root = _Lines(), logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


def test_a_dead_lettered_permanent_error_is_one_warning_line_without_traceback(
    pipeline: Pipeline, lines: _Lines
) -> None:
    account = pipeline.account()
    pipeline.provider.add_fault(error="forbidden", title="^Locked")
    receipt = pipeline.submit([account], title="Locked room")
    with pipeline.worker():
        pipeline.wait_target(receipt.entity_id, account, "failed")
    [record] = pipeline.dead_letters()
    assert lines.at("error", "critical") == []
    assert [line for line in lines.lines if "exc" in line] == []
    [warning] = lines.at("warning")
    assert warning["logger"] == "calsync.jobs" and warning["outcome"] == "dead_lettered"
    assert (warning["job_id"], warning["tenant_id"], warning["entity_id"], warning["account_id"]) == (
        record.job_id, "tenant-1", receipt.entity_id, account)  # fmt: skip
    assert (warning["reason"], warning["error_class"]) == (record.reason, "Forbidden") == ("forbidden", "Forbidden")


def test_a_retried_provider_error_is_one_warning_line_without_traceback(pipeline: Pipeline, lines: _Lines) -> None:
    account = pipeline.account()
    pipeline.provider.add_fault(op="upsert", error="unavailable", times=1)
    receipt = pipeline.submit([account])
    with pipeline.worker():
        pipeline.wait_target(receipt.entity_id, account, "synced")
    assert lines.at("error", "critical") == [] and [line for line in lines.lines if "exc" in line] == []
    [warning] = lines.at("warning")
    assert (warning["outcome"], warning["error_class"]) == ("retry_scheduled", "ProviderUnavailable")
    assert (warning["entity_id"], warning["account_id"]) == (receipt.entity_id, account) and warning["job_id"]


class _BuggyOnce(MemoryProvider):
    """A provider whose first write fails with an exception nobody expected (a bug, not a provider error)."""

    failed = False

    def upsert(self, account: Account, event: EventState, target: Target) -> ExternalRef:
        if not self.failed:
            self.failed = True
            raise RuntimeError("adapter bug: unexpected None")
        return super().upsert(account, event, target)


def test_an_unexpected_exception_logs_its_traceback_once(settings_factory: Any, lines: _Lines) -> None:
    settings: Settings = settings_factory(retry_schedule=(0.1,))
    pipeline = Pipeline(settings, provider=_BuggyOnce())
    try:
        account = pipeline.account()
        receipt = pipeline.submit([account])
        with pipeline.worker():
            pipeline.wait_target(receipt.entity_id, account, "synced")
    finally:
        pipeline.close()
    tracebacks = [line for line in lines.lines if "exc" in line]
    assert len(tracebacks) == 1 and "RuntimeError: adapter bug: unexpected None" in tracebacks[0]["exc"]
    assert tracebacks[0]["level"] == "error" and tracebacks[0]["job_id"]

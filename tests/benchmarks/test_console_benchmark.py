"""benchmarks/console.py at a tiny size: it fills, explains one overview reading's statements and times the live
region over HTTP, every answer a 200 with the region (the figures themselves are the benchmark's, not checked)."""

from __future__ import annotations

import pytest

from benchmarks.console import run
from tests.support import Pipeline

pytestmark = [pytest.mark.postgresql_only, pytest.mark.slow]


def test_the_console_benchmark_runs_at_a_tiny_size(pipeline: Pipeline) -> None:
    printed: list[str] = []
    figures = run(pipeline.clients, events=300, requests=5, queued=3, out=printed.append)
    assert set(figures) == {"read_overview in process, median", "GET /console/overview/live p50",
                            "GET /console/overview/live p99"}  # fmt: skip
    assert all(ms > 0 for ms in figures.values())
    report = "\n".join(printed)
    assert "'event_targets': 900" in report and "3 jobs queued" in report
    assert "ix_event_targets_status_due" in report  # the statements were recorded and explained

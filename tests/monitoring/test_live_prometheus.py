"""The shipped alerts, proven in a real Prometheus scraping real calsync processes (issue 35).

Each scenario provokes an alert's real cause (a stopped process, a killed pod, a paused pipeline, a broken
provider, a failing webhook receiver, a stopped exporter), waits for Prometheus to fire the alert through
/api/v1/alerts, removes the cause and waits for it to resolve. The rules are the shipped ones with a test
profile of thresholds, windows and ``for:`` (tests/monitoring/live.py). One Prometheus and one worker serve
every scenario of a test, in sequence: they are what takes the time.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from tests.monitoring.stack import STACK_SETTINGS, Stack, running_stack

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _quiet(stack: Stack, account: str, seconds: float) -> None:
    """A healthy load for ``seconds``: a change every 0.2 s, all synced; no alert may even be pending."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        stack.submit(1, account)
        assert stack.prom.alerts() == [], stack.prom.alerts()
        time.sleep(0.2)
    stack.pipeline.wait_idle(timeout=30)
    assert stack.prom.alerts() == []


def test_a_quiet_healthy_run_fires_no_alert(settings_factory: Any, tmp_path: Path) -> None:
    with running_stack(settings_factory(**STACK_SETTINGS), tmp_path) as stack:
        _quiet(stack, stack.pipeline.account(), 20)


def test_every_alert_fires_in_its_scenario_and_resolves_after(settings_factory: Any, tmp_path: Path) -> None:
    with running_stack(settings_factory(**STACK_SETTINGS), tmp_path) as stack:
        prom, account = stack.prom, stack.pipeline.account()
        stack.submit(3, account)
        stack.pipeline.wait_idle()

        # One worker process stuck (SIGSTOP): its heartbeat series freezes; the other one goes on.
        stuck = stack.worker_pids()[0]
        os.kill(stuck, signal.SIGSTOP)
        try:
            [labels] = prom.wait_firing("CalsyncWorkerHeartbeatStale")
            assert labels["worker"].endswith(f":{stuck}") and labels["pod"] == "calsync-worker-0"
        finally:
            os.kill(stuck, signal.SIGCONT)
        prom.wait_resolved("CalsyncWorkerHeartbeatStale")
        assert "CalsyncNoActiveWorkers" not in prom.firing()

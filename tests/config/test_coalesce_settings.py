"""The coalescing settings: bounds, the hold check, and the poll interval Dramatiq's worker really reads."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from calsync.core.config.settings import Settings, load_settings, worker_environment
from calsync.core.model.errors import ConfigurationError


def test_the_longest_hold_may_not_be_shorter_than_the_window(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CALSYNC_COALESCE_WINDOW", "20")
    with pytest.raises(ConfigurationError, match="CALSYNC_COALESCE_MAX_WAIT must be at least CALSYNC_COALESCE_WINDOW"):
        load_settings()


@pytest.mark.parametrize("value", ["-1", "61"])
def test_a_window_out_of_bounds_is_refused(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("CALSYNC_COALESCE_WINDOW", value)
    with pytest.raises(ConfigurationError, match="CALSYNC_COALESCE_WINDOW"):
        load_settings()


def test_a_dramatiq_worker_started_with_the_worker_environment_polls_that_often(tmp_path: Path) -> None:
    env = {**os.environ, **worker_environment(Settings(data_dir=tmp_path))}
    probe = "import dramatiq.worker as w; print(w.Worker(__import__('dramatiq').get_broker()).worker_timeout)"
    stub = "import dramatiq; from dramatiq.brokers.stub import StubBroker; dramatiq.set_broker(StubBroker()); "
    out = subprocess.run([sys.executable, "-c", stub + probe], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "250"

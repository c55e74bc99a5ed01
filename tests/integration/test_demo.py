"""The README's first command: `calsync demo` runs the whole scripted scenario and exits 0."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_the_demo_runs_end_to_end_on_embedded_defaults(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CALSYNC_")}
    env["CALSYNC_DATA_DIR"] = str(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "calsync.actors.cli.main", "demo"], env=env, capture_output=True, text=True, timeout=280
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    for expected in ("skipped as stale", "dead-lettered", "invalid payload", "forbidden", "Exchange EWS emulator",
                     "Google Calendar emulator"):  # fmt: skip
        assert expected in out
    assert "pending" in out and "not everything settled" not in out
    # The demo stopped its embedded Redis and its worker.
    assert not (tmp_path / "demo" / "redis" / "server.json").exists()

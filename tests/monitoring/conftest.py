"""promtool for the monitoring tests: skipped where it is missing, unless TEST_REQUIRE_SERVICES names it."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

Promtool = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="session")
def promtool(promtool_binary: str) -> Promtool:
    """Runs ``promtool ARGS…`` in a directory and returns the finished process (output as text)."""
    path = promtool_binary

    def run(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([path, *map(str, args)], cwd=cwd, capture_output=True, text=True, check=False)

    return run

"""promtool for the monitoring tests: skipped where it is missing, unless CALSYNC_TEST_REQUIRE names it."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import REQUIRED

Promtool = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="session")
def promtool() -> Promtool:
    """Runs ``promtool ARGS…`` in a directory and returns the finished process (output as text)."""
    path = shutil.which("promtool")
    if path is None:
        if "promtool" in REQUIRED:
            pytest.fail("promtool is required by CALSYNC_TEST_REQUIRE but not on PATH (Debian package prometheus)")
        pytest.skip("promtool is not installed (Debian package prometheus)")

    def run(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([path, *map(str, args)], cwd=cwd, capture_output=True, text=True, check=False)

    return run

"""``calsync worker`` commands as subprocesses, each in a process group of its own (its Dramatiq children too).

A group can be stopped as an operator would (SIGTERM, then SIGKILL after a grace period: :func:`stop_group`) or
killed at once, as a node or an OOM killer does (:func:`kill_group`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path


def calsync_script() -> str:
    """The ``calsync`` console script next to this interpreter (the one of this environment)."""
    return str(Path(sys.executable).with_name("calsync"))


def start_worker(env: dict[str, str], log: Path, *args: str, cwd: Path | None = None) -> subprocess.Popen[bytes]:
    """``calsync worker ARGS`` in a process group of its own, its output appended to ``log``."""
    with open(log, "ab") as out:
        return subprocess.Popen([calsync_script(), "worker", *args], env=env, cwd=cwd, stdout=out, stderr=out,
                                start_new_session=True)  # fmt: skip


def stop_group(proc: subprocess.Popen[bytes], *, timeout: float = 60) -> None:
    """SIGTERM a process group started by :func:`start_worker` and wait; SIGKILL it after ``timeout``."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc)


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL every process of the group started by :func:`start_worker` (no shutdown runs) and reap its leader."""
    with contextlib.suppress(ProcessLookupError):  # the whole group is gone already
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()

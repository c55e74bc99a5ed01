"""The real ``calsync`` console script in a subprocess: what scripts and operators actually run."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from calsync.core.config.settings import Settings

SCRIPT = shutil.which("calsync", path=str(Path(sys.executable).parent)) or "calsync"


def base_environment() -> dict[str, str]:
    """This environment without any ``CALSYNC_*`` variable (tests say exactly what calsync sees)."""
    return {k: v for k, v in os.environ.items() if not k.upper().startswith("CALSYNC_")}


def calsync(
    *args: str,
    settings: Settings | None = None,
    env: dict[str, str] | None = None,
    stdin: str | None = None,
    timeout: float = 120,
) -> subprocess.CompletedProcess[str]:
    """Run ``calsync ARGS`` with ``settings`` as its environment (plus ``env``; an empty value unsets).

    It runs in a session of its own: past ``timeout`` the whole group (a worker's children too) is killed.
    """
    environment = base_environment()
    if settings is not None:
        environment.update(settings.as_environment())
    for name, value in (env or {}).items():
        if value == "":
            environment.pop(name, None)
        else:
            environment[name] = value
    with subprocess.Popen(
        [SCRIPT, *args], env=environment, text=True, start_new_session=True,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    ) as process:  # fmt: skip
        try:
            out, err = process.communicate(stdin, timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            out, err = process.communicate()
            raise AssertionError(f"calsync {' '.join(args)} still ran after {timeout}s: {err[-2000:]}") from None
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def change_file(directory: Path, *accounts: str, title: str = "Sprint demo") -> str:
    """A valid upsert change file for ``accounts``; returns its path."""
    path = directory / "change.json"
    event = {"title": title, "start": "2026-12-03T15:00", "end": "2026-12-03T16:00"}
    path.write_text(json.dumps({"operation": "upsert", "accounts": list(accounts), "event": event}))
    return str(path)


def json_out(done: subprocess.CompletedProcess[str], code: int = 0) -> Any:
    """stdout parsed as exactly one JSON document, after checking the exit code."""
    assert done.returncode == code, (done.returncode, done.stdout, done.stderr)
    return json.loads(done.stdout)


def one_line_error(done: subprocess.CompletedProcess[str], code: int) -> str:
    """The single ``calsync: error: …`` line on stderr (nothing on stdout), after checking the exit code."""
    assert done.returncode == code, (done.returncode, done.stdout, done.stderr)
    assert done.stdout == "", done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("calsync: error: "), done.stderr
    return lines[0]


def redis_servers_of(data_dir: Path) -> list[int]:
    """Pids of live redis-server processes working in ``data_dir`` (the embedded one chdirs to its data)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            name = (entry / "comm").read_text().strip()
            zombie = "State:\tZ" in (entry / "status").read_text()
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if name.startswith("redis-server") and not zombie and cwd.startswith(str(data_dir)):
            found.append(int(entry.name))
    return found

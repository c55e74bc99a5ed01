"""The README's first command: `calsync demo` runs the whole scripted scenario and exits 0.

`demo` and `emulator` come from the calsync-emulators distribution (emulators/), registered through the
``calsync.commands`` entry-point group; the runtime CLI knows nothing else about them.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from importlib.metadata import EntryPoint
from pathlib import Path

import click
import pytest

from calsync.actors.cli import main

ROOT = Path(__file__).resolve().parents[2]
EMULATORS = ROOT / "emulators"


def test_the_emulators_commands_reach_the_cli_through_the_entry_point_group(monkeypatch: pytest.MonkeyPatch) -> None:
    declared = tomllib.loads((EMULATORS / "pyproject.toml").read_text())["project"]["entry-points"]
    entries = [EntryPoint(name, value, main.COMMAND_GROUP) for name, value in declared[main.COMMAND_GROUP].items()]
    monkeypatch.setattr(main, "entry_points", lambda group: entries if group == main.COMMAND_GROUP else [])
    group = click.Group()
    main.add_installed_commands(group)
    assert sorted(group.commands) == ["demo", "emulator"]
    assert all(isinstance(command, click.Command) for command in group.commands.values())


@pytest.mark.integration
@pytest.mark.slow
def test_the_demo_runs_end_to_end_on_embedded_defaults(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CALSYNC_")}
    env["CALSYNC_DATA_DIR"] = str(tmp_path)
    # `python -m calsync_emulators` is the calsync CLI plus the distribution's commands, installed or not.
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(EMULATORS), env.get("PYTHONPATH")) if p)
    done = subprocess.run(
        [sys.executable, "-m", "calsync_emulators", "demo"], env=env, capture_output=True, text=True, timeout=280
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    for expected in ("skipped as stale", "dead-lettered", "invalid payload", "forbidden", "Exchange EWS emulator",
                     "Google Calendar emulator"):  # fmt: skip
        assert expected in out
    assert "pending" in out and "not everything settled" not in out
    # The demo stopped its embedded Redis and its worker.
    assert not (tmp_path / "demo" / "redis" / "server.json").exists()

"""The README's first command: `calsync demo` runs the whole scripted scenario and exits 0.

`demo` and `emulator` come from the calsync-emulators distribution (emulators/), registered through the
``calsync.commands`` entry-point group; the runtime CLI knows nothing else about them.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from importlib.metadata import EntryPoint
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from calsync.actors.cli import main
from calsync.core.redis.embedded import EmbeddedRedis

ROOT = Path(__file__).resolve().parents[2]
EMULATORS = ROOT / "emulators"


def _registered(monkeypatch: pytest.MonkeyPatch, entries: list[EntryPoint]) -> None:
    def fake(*, group: str, name: str | None = None) -> list[EntryPoint]:
        return [e for e in entries if group == main.COMMAND_GROUP and name in (None, e.name)]

    monkeypatch.setattr(main, "entry_points", fake)


def test_the_emulators_commands_reach_the_cli_through_the_entry_point_group(monkeypatch: pytest.MonkeyPatch) -> None:
    declared = tomllib.loads((EMULATORS / "pyproject.toml").read_text())["project"]["entry-points"]
    _registered(monkeypatch, [EntryPoint(n, v, main.COMMAND_GROUP) for n, v in declared[main.COMMAND_GROUP].items()])
    ctx = click.Context(main.cli)
    assert {"demo", "emulator", "migrate"} <= set(main.cli.list_commands(ctx))
    assert all(isinstance(main.cli.get_command(ctx, name), click.Command) for name in ("demo", "emulator"))


def test_a_plugin_that_cannot_load_never_stops_the_built_in_commands(monkeypatch: pytest.MonkeyPatch) -> None:
    _registered(monkeypatch, [EntryPoint("demo", "calsync_missing_plugin.cli:demo", main.COMMAND_GROUP)])
    runner = CliRunner()
    assert runner.invoke(main.cli, ["secret-key"]).exit_code == 0
    broken = runner.invoke(main.cli, ["demo"])
    assert broken.exit_code == 2 and "cannot load" in broken.output, broken.output


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
                     "Exchange Graph emulator", "Offsite (Graph 429 + Retry-After)",
                     "Google Calendar emulator"):  # fmt: skip
        assert expected in out
    assert "pending" in out and "not everything settled" not in out
    # The demo stopped its embedded Redis and its worker.
    assert EmbeddedRedis(tmp_path / "demo").running_url() is None
    # It ends with the commands that show its data; they work as printed, with nothing else set.
    tail = out[out.index("inspect this run's data:") :]
    exported = re.search(r"export CALSYNC_DATA_DIR=(\S+)", tail)
    assert exported and Path(shlex.split(exported.group(1))[0]) == tmp_path / "demo"
    shown = re.search(r"^  (\S+) dlq show (\S+)$", tail, re.M)
    assert shown and re.search(r"^  \S+ dlq list ", tail, re.M) and " events show " in tail
    env["CALSYNC_DATA_DIR"] = str(tmp_path / "demo")
    listed = subprocess.run([*shlex.split(shown.group(1)), "dlq", "list", "--json"], env=env, capture_output=True,
                            text=True, timeout=60)  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    assert shown.group(2) in {str(record["id"]) for record in json.loads(listed.stdout)}

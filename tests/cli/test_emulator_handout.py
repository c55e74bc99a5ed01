"""``calsync emulator KIND`` hands out working credentials: every ``accounts add`` command it prints, run with the
environment it prints, registers an account whose ``--verify`` call the emulator answers."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from calsync.core.store.crypto import CredentialCipher, generate_key
from calsync_emulators.handout import Handout
from tests.cli.process import SCRIPT, calsync, json_out

EMULATORS = Path(__file__).resolve().parents[2] / "emulators"


def _handout(kind: str, directory: Path) -> tuple[subprocess.Popen[str], list[str]]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(EMULATORS), os.environ.get("PYTHONPATH")) if p)}
    command = [
        sys.executable,
        "-m",
        "calsync_emulators",
        "emulator",
        kind,
        "--port",
        "0",
        "--credentials-dir",
        str(directory),
    ]
    child = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
    assert child.stderr is not None
    lines = [child.stderr.readline()]
    while not re.match(r"  (logins|every address)", lines[-1]):
        assert lines[-1], "the emulator stopped before its handout was complete"
        lines.append(child.stderr.readline())
    return child, [line.rstrip("\n") for line in lines]


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "commands"), [("google", 1), ("ews", 2), ("exchange", 3)])
def test_every_printed_command_registers_a_verified_account(
    kind: str, commands: int, settings_factory: Any, tmp_path: Path
) -> None:
    settings = settings_factory(secret_key=generate_key())
    json_out(calsync("migrate", settings=settings))
    child, lines = _handout(kind, tmp_path / "handout")
    try:
        exports = dict(re.findall(r"^  export (CALSYNC_[A-Z_]+|OAUTHLIB_[A-Z_]+)=(\S+)$", "\n".join(lines), re.M))
        added = [shlex.split(line.strip()) for line in lines if line.startswith("  calsync accounts add ")]
        assert len(added) == commands and all(
            Path(p).exists() for p in re.findall(r"credentials file: (\S+)", "\n".join(lines))
        )
        env = {name: shlex.split(value)[0] for name, value in exports.items()}
        for command in added:
            assert command[-1] == "--verify"
            assert json_out(calsync(*command[1:], settings=settings, env=env))["account_id"]
    finally:
        child.terminate()
        child.wait(timeout=10)
    listed = json_out(calsync("accounts", "list", "--json", settings=settings))
    assert len(listed) == commands and all(a["tenant_id"] == "acme" and a["has_credentials"] for a in listed)


def test_the_printed_key_export_keeps_a_key_already_set(tmp_path: Path) -> None:
    [line] = [line.strip() for line in Handout().lines() if "CALSYNC_SECRET_KEY" in line]
    env = {"PATH": f"{Path(SCRIPT).parent}{os.pathsep}{os.environ['PATH']}", "HOME": str(tmp_path)}

    def after_pasting(**preset: str) -> str:
        done = subprocess.run(["sh", "-c", f'{line}\nprintf %s "$CALSYNC_SECRET_KEY"'], env={**env, **preset},
                              capture_output=True, text=True, check=True, timeout=60)  # fmt: skip
        return done.stdout

    first = after_pasting()
    CredentialCipher(first)  # a valid key, made by `calsync secret-key`
    assert after_pasting(CALSYNC_SECRET_KEY=first) == first  # a second handout keeps it

#!/usr/bin/env python3
"""The README's two commands, needing nothing but Python 3.11+:

    python3 dev.py demo    # set up .venv from requirements.lock, then run `calsync demo`
    python3 dev.py test    # set up .venv from requirements-dev.lock, then lint, type-check and run every test

The test command also checks the import contracts (lint-imports). Both install from the hash-pinned
lock files (the same ones the Docker image uses) into ./.venv, and only reinstall when a lock file or
pyproject.toml changed. Extra arguments go to the demo or to pytest. pytest spreads the tests over
worker processes (pytest-xdist, PYTEST_WORKERS below): many of them wait on subprocesses, servers and
emulators, not on the CPU. `-n 0` (or `-p no:xdist`) runs them in this process, one after another.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / "bin"
STAMP = VENV / ".calsync-installed"
EMULATORS = ROOT / "emulators"  # the calsync-emulators distribution: emulators, demo, test fixtures
LINTED = ["calsync", "core", "actors", "providers", "emulators", "tests", "benchmarks", "k8s", "dev.py"]
TYPED = ["calsync", "emulators/calsync_emulators"]
# Four workers on two cores (measured against 2, 6 and --dist worksteal: docs/TESTING.md); one test at a time,
# the `slow` ones first (tests/conftest.py), so no worker is left alone with a queue of long tests at the end.
PYTEST_WORKERS = ["-n", "4", "--dist", "load", "--maxschedchunk", "1"]


def _say(text: str) -> None:
    print(f"==> {text}", flush=True)


def _run(*args: str | Path, env: dict[str, str] | None = None) -> None:
    result = subprocess.run([str(a) for a in args], cwd=ROOT, env=env, check=False)
    if result.returncode != 0:
        sys.exit(result.returncode)


def _fingerprint(lock: str) -> str:
    digest = hashlib.sha256()
    for name in (lock, "pyproject.toml", "emulators/pyproject.toml"):
        digest.update((ROOT / name).read_bytes())
    return f"{lock}:{digest.hexdigest()}"


def ensure_environment(*, dev: bool) -> None:
    """Create .venv and install the locked dependencies, calsync and calsync-emulators, unless already current."""
    if sys.version_info < (3, 11):  # noqa: UP036 - this file runs under whatever python3 the user has
        sys.exit(f"calsync needs Python 3.11 or newer; this is {sys.version.split()[0]}")
    wanted = ["requirements-dev.lock"] if dev else ["requirements.lock", "requirements-dev.lock"]
    installed = STAMP.read_text().splitlines() if STAMP.exists() else []
    if any(_fingerprint(lock) in installed for lock in wanted):
        return
    lock = wanted[0]
    if not (BIN / "python").exists():
        _say(f"creating {VENV.relative_to(ROOT)}")
        venv.EnvBuilder(with_pip=True, clear=True).create(VENV)
    _say(f"installing {lock} (hash-pinned)")
    pip = [BIN / "python", "-m", "pip", "--disable-pip-version-check", "-q"]
    _run(*pip, "install", "--upgrade", "pip>=24")
    _run(*pip, "install", "--require-hashes", "-r", ROOT / lock)
    # The build backend (setuptools) is in the lock, so the project installs without fetching anything unpinned.
    _run(*pip, "install", "--no-deps", "--no-build-isolation", "-e", ROOT)
    # `calsync demo`, `calsync emulator` and the tests' emulator fixtures live in this second distribution.
    _run(*pip, "install", "--no-deps", "--no-build-isolation", "-e", EMULATORS)
    STAMP.write_text(_fingerprint(lock) + "\n")


def demo(args: list[str]) -> None:
    """Run the scripted demo on embedded defaults."""
    ensure_environment(dev=False)
    os.execv(BIN / "calsync", [str(BIN / "calsync"), "demo", *args])


def test(args: list[str]) -> None:
    """Lint, type-check, and run the whole suite."""
    ensure_environment(dev=True)
    _say("ruff")
    _run(BIN / "ruff", "check", *[p for p in LINTED if (ROOT / p).exists()])
    _say("mypy --strict")
    _run(BIN / "mypy", *TYPED)
    _say("import contracts (lint-imports)")
    _run(BIN / "lint-imports", "--no-cache")
    _say("pytest")
    parallel = [] if any("no:xdist" in arg for arg in args) else PYTEST_WORKERS  # a later `-n 0` wins over ours
    _run(BIN / "python", "-m", "pytest", "-q", "-ra", *parallel, *args)


COMMANDS = {"demo": demo, "test": test}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        sys.exit(f"usage: python3 {Path(__file__).name} {{{'|'.join(COMMANDS)}}} [args...]")
    COMMANDS[sys.argv[1]](sys.argv[2:])

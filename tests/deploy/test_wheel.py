"""The wheel installs ONE top-level package, ``calsync``: a consumer with its own ``core``, ``actors`` and
``providers`` packages imports both them and calsync, and ``calsync.submit_change`` works from the wheel.

The wheel is built from a copy of the sources (the build writes ``build/`` beside them), installed into a
fresh venv that sees the dev venv's third-party packages through a ``.pth`` line but not its editable
calsync: a directory listed in a ``.pth`` file is not scanned for ``.pth`` files of its own.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import zipfile
from pathlib import Path
from typing import Any

import pytest

from tests.producer.broker_queue import queued_payloads

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
SOURCES = ("pyproject.toml", "README.md", "calsync", "core", "actors", "providers")
CONSUMER_PACKAGES = ("core", "actors", "providers")

CONSUMER = """
import json, sys

import actors, core, providers
import calsync

for name in calsync.__all__:
    getattr(calsync, name)
receipt = calsync.submit_change("tenant-1", {
    "operation": "upsert", "entity_id": "evt-wheel", "accounts": ["acc-wheel"],
    "event": {"title": "From the wheel", "start": "2026-12-01T09:00:00", "end": "2026-12-01T10:00:00",
              "time_zone": "Europe/Berlin"},
})
print(json.dumps({
    "markers": {package.__name__: package.MARKER for package in (core, actors, providers)},
    "files": {name: sys.modules[name].__file__ for name in ("calsync", "calsync.core", "core")},
    "editable_finder_loaded": any("__editable__" in name for name in sys.modules),
    "all": calsync.__all__,
    "receipt_is_a_receipt": isinstance(receipt, calsync.Receipt),
    "invalid_change_is_a_calsync_error": issubclass(calsync.InvalidChange, calsync.CalsyncError),
    "receipt": receipt.as_json(),
}))
"""


def _run(*args: str | Path, cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, check=False,
                          timeout=240)  # fmt: skip
    assert done.returncode == 0, f"{args} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def _build_wheel(tmp_path: Path) -> Path:
    source = tmp_path / "source"
    source.mkdir()
    for name in SOURCES:
        origin = REPO / name
        if origin.is_dir():
            shutil.copytree(origin, source / name, symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(origin, source / name)
    dist = tmp_path / "dist"
    _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", source, "-w", dist, cwd=tmp_path)
    (wheel,) = dist.glob("calsync-*.whl")
    return wheel


def _fresh_venv(tmp_path: Path, wheel: Path) -> Path:
    """A venv holding only the wheel, plus the dev venv's third-party packages on its path (no .pth of theirs)."""
    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=tmp_path)
    python = venv / "bin" / "python"
    _run(sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", wheel, cwd=tmp_path)
    site = Path(_run(python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))", cwd=tmp_path).strip())
    (site / "dev_venv_packages.pth").write_text(sysconfig.get_path("purelib") + "\n")
    return venv


def _consumer(tmp_path: Path) -> Path:
    """A project of the consumer's with top-level packages named like the repository's folders."""
    consumer = tmp_path / "consumer"
    for package in CONSUMER_PACKAGES:
        (consumer / package).mkdir(parents=True)
        (consumer / package / "__init__.py").write_text(f'MARKER = "consumer {package}"\n')
    (consumer / "consume.py").write_text(textwrap.dedent(CONSUMER))
    return consumer


def test_the_wheel_ships_one_top_level_package_that_cannot_collide(
    tmp_path: Path, redis_url: str, namespace: str
) -> None:
    wheel = _build_wheel(tmp_path)
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/", 1)[0] for name in names}
    assert tops == {"calsync", "calsync-0.1.0.dist-info"}
    assert not [n for n in names if n.split("/", 1)[0] in CONSUMER_PACKAGES]
    assert not [n for n in names if "emulator" in n or "demo" in n], "the emulators ship in calsync-emulators only"
    assert {"calsync/__init__.py", "calsync/core/model/planner.py", "calsync/actors/cli/main.py",
            "calsync/providers/google/provider.py", "calsync/core/store/migrations/env.py"} <= set(names)  # fmt: skip
    lua = {f"calsync/{path.relative_to(REPO)}" for name in CONSUMER_PACKAGES for path in (REPO / name).rglob("*.lua")}
    assert lua and lua <= set(names), "every Lua script ships beside the module that runs it"
    console = REPO / "core" / "console"
    pages = {
        f"calsync/{p.relative_to(REPO)}" for folder in ("templates", "static") for p in (console / folder).iterdir()
    }
    assert pages and pages <= set(names), "the console's templates and static files ship in the package"

    venv = _fresh_venv(tmp_path, wheel)
    consumer = _consumer(tmp_path)
    env = {name: value for name, value in os.environ.items()
           if name != "PYTHONPATH" and not name.startswith("CALSYNC_")}  # fmt: skip
    env |= {
        "PYTHONPATH": str(consumer),
        "CALSYNC_BROKER_URL": redis_url,
        "CALSYNC_REDIS_NAMESPACE": namespace,
        "CALSYNC_DATABASE_URL": f"sqlite:///{tmp_path / 'wheel.sqlite3'}",
        "CALSYNC_DATA_DIR": str(tmp_path / "data"),
    }
    calsync_cli = venv / "bin" / "calsync"
    _run(calsync_cli, "migrate", cwd=consumer, env=env)
    _run(calsync_cli, "accounts", "add", "--tenant", "tenant-1", "--provider", "memory", "--address", "w@example.com",
         "--id", "acc-wheel", cwd=consumer, env=env)  # fmt: skip

    facts: dict[str, Any] = json.loads(_run(venv / "bin" / "python", "consume.py", cwd=consumer, env=env))
    render = "from calsync.core.console.templating import templates; print(templates.get_template('sign_in.html').name)"
    assert _run(venv / "bin" / "python", "-c", render, cwd=consumer, env=env).strip() == "sign_in.html"

    assert facts["markers"] == {package: f"consumer {package}" for package in CONSUMER_PACKAGES}
    assert Path(facts["files"]["core"]) == consumer / "core" / "__init__.py"
    for name in ("calsync", "calsync.core"):
        assert Path(facts["files"][name]).is_relative_to(venv), f"{name} must come from the wheel, not the repo"
    assert not facts["editable_finder_loaded"]
    assert facts["all"] == sorted(facts["all"])
    assert {"submit_change", "Receipt", "Change", "CalsyncError", "InvalidChange"} <= set(facts["all"])
    assert facts["receipt_is_a_receipt"] and facts["invalid_change_is_a_calsync_error"]
    receipt = facts["receipt"]
    assert (receipt["entity_id"], receipt["version"], receipt["deferred_accounts"]) == ("evt-wheel", 1, [])
    assert len(receipt["job_ids"]) == 1
    assert [job["job_id"] for job in queued_payloads(redis_url, namespace)] == receipt["job_ids"]

"""The Dockerfile lints clean and keeps its contract; the entrypoint script is run for real with a stand-in calsync.

There is no Docker engine here, so the image is never built: these tests check what can be checked offline.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.deploy.conftest import Tool
from tests.deploy.manifests import ROOT, Manifests, pod_spec

DOCKERFILE = ROOT / "Dockerfile"
ENTRYPOINT = ROOT / "docker" / "entrypoint.sh"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    found = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, rest = line.partition(" ")
            found.append((keyword.upper(), rest.strip()))
    return found


def of(keyword: str) -> list[str]:
    """Arguments of every instruction of one kind."""
    return [rest for key, rest in instructions() if key == keyword]


def image_env() -> dict[str, str]:
    """The ENV values of the runtime (last) stage, in KEY=VALUE form."""
    steps = instructions()
    last_from = max(index for index, (key, _) in enumerate(steps) if key == "FROM")
    env: dict[str, str] = {}
    for key, rest in steps[last_from:]:
        if key == "ENV":
            env.update(dict(pair.split("=", 1) for pair in rest.split()))
    return env


def test_hadolint_passes(hadolint: Tool) -> None:
    done = hadolint("--failure-threshold", "info", DOCKERFILE)
    assert done.returncode == 0, done.stdout + done.stderr


def test_ignored_hadolint_rules_are_justified() -> None:
    lines = DOCKERFILE.read_text().splitlines()
    for number, line in enumerate(lines):
        if "hadolint ignore" in line:
            above = lines[number - 1].strip() if number else ""
            assert above.startswith("#") and "hadolint" not in above, f"line {number + 1}: say why the rule is ignored"


@pytest.mark.parametrize("script", [ENTRYPOINT, ROOT / ".ci" / "run"], ids=["entrypoint", "ci-run"])
def test_shellcheck_passes_on_the_shell_scripts(shellcheck: Tool, script: Path) -> None:
    done = shellcheck("--shell=sh", "--severity=style", script)
    assert done.returncode == 0, done.stdout + done.stderr


def test_stages_use_slim_python_pinned_to_a_debian_codename() -> None:
    froms = of("FROM")
    assert len(froms) >= 2, "multi-stage: build tools stay out of the runtime image"
    (default,) = [rest.split("=", 1)[1] for rest in of("ARG") if rest.startswith("PYTHON_IMAGE=")]
    lock_python = re.search(r"--python-version (\d+\.\d+)", (ROOT / "requirements.lock").read_text())
    assert lock_python, "requirements.lock no longer records its Python version"
    assert re.fullmatch(rf"python:{re.escape(lock_python.group(1))}(\.\d+)?-slim-(bookworm|trixie)", default), default
    assert all(rest.startswith("${PYTHON_IMAGE}") for rest in froms)


def test_dependencies_install_from_the_hash_pinned_lock() -> None:
    runs = " ".join(of("RUN"))
    assert "pip install --require-hashes --no-deps -r requirements.lock" in runs
    assert "--no-build-isolation" in runs, "the project must build with the locked setuptools, nothing unpinned"


def test_runtime_contract() -> None:
    env = image_env()
    assert env["PYTHONDONTWRITEBYTECODE"] == "1" and env["PYTHONUNBUFFERED"] == "1"
    (user,) = of("USER")
    assert re.fullmatch(r"\d+:\d+", user) and not user.startswith("0:"), "a numeric non-root user for runAsNonRoot"
    (entrypoint,) = of("ENTRYPOINT")
    (cmd,) = of("CMD")
    entry, default = json.loads(entrypoint), json.loads(cmd)  # exec form, or json.loads fails
    assert entry[0].endswith("/tini") and "-g" not in entry, "tini without -g: a group SIGTERM kills workers mid-job"
    assert entry[1] == "--" and entry[2] == "/usr/local/bin/calsync-entrypoint"
    assert default == ["worker"]


def test_image_user_is_the_one_kubernetes_runs_as(rendered: dict[str, Manifests]) -> None:
    uid, gid = (int(part) for part in of("USER")[0].split(":"))
    for manifests in rendered.values():
        for workload in manifests.workloads():
            context = pod_spec(workload)["securityContext"]
            assert (context["runAsUser"], context["runAsGroup"]) == (uid, gid), workload["metadata"]["name"]


def test_dockerignore_keeps_what_the_dockerfile_copies() -> None:
    """The .dockerignore is an allowlist; every COPY source from the context must be re-included."""
    patterns = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()]
    allowed = {p[1:].rstrip("/") for p in patterns if p.startswith("!")}
    assert "*" in patterns
    for rest in of("COPY"):
        if "--from=" in rest:
            continue
        sources = [part for part in rest.split() if not part.startswith("--")][:-1]
        for source in sources:
            assert source.rstrip("/") in allowed, f"COPY {source} is excluded by .dockerignore"
            assert (ROOT / source).exists(), f"COPY {source}: no such path"


def test_the_image_holds_no_emulator_or_demo_code() -> None:
    """calsync-emulators (emulators/) is a development distribution: neither copied nor in the build context."""
    copied = [part for rest in of("COPY") if "--from=" not in rest for part in rest.split()[:-1]]
    assert not [source for source in copied if "emulators" in source]
    patterns = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()]
    assert not [p for p in patterns if p.startswith("!") and "emulators" in p]


# --- the entrypoint, run for real ----------------------------------------------------------------------------


@pytest.fixture
def entrypoint(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A PATH whose `calsync` records its arguments and pid, and environment pointing the dirs into tmp_path."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "calsync"
    fake.write_text('#!/bin/sh\necho "pid=$$ args=$*"\n')
    fake.chmod(0o755)
    env = {
        "PATH": f"{bin_dir}{os.pathsep}/usr/bin:/bin",
        "CALSYNC_METRICS_DIR": str(tmp_path / "metrics"),
        "CALSYNC_HEARTBEAT_DIR": str(tmp_path / "heartbeats"),
    }
    for directory, names in (("metrics", ["counter_7.db", "gauge_livesum_7.db", "keep.txt"]),
                             ("heartbeats", ["worker-7.heartbeat", "keep.txt"])):  # fmt: skip
        (tmp_path / directory).mkdir()
        for name in names:
            (tmp_path / directory / name).write_text("stale")
    return tmp_path, env


def _run(env: dict[str, str], *args: str) -> tuple[int, str]:
    process = subprocess.Popen(["sh", str(ENTRYPOINT), *args], env=env, stdout=subprocess.PIPE, text=True)
    out, _ = process.communicate(timeout=10)
    assert process.returncode == 0
    return process.pid, out.strip()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ((), "worker"),
        (("worker", "--processes", "2"), "worker --processes 2"),
        (("--threads", "4"), "worker --threads 4"),
    ],
)
def test_worker_starts_with_empty_metrics_and_heartbeat_dirs(
    entrypoint: tuple[Path, dict[str, str]], args: tuple[str, ...], expected: str
) -> None:
    tmp_path, env = entrypoint
    pid, out = _run(env, *args)
    assert out == f"pid={pid} args={expected}", "calsync must replace the script (exec) to receive SIGTERM itself"
    assert sorted(p.name for p in (tmp_path / "metrics").iterdir()) == ["keep.txt"]
    assert sorted(p.name for p in (tmp_path / "heartbeats").iterdir()) == ["keep.txt"]


@pytest.mark.parametrize("command", [("exporter",), ("migrate",), ("reconcile", "--enqueue")])
def test_other_commands_run_calsync_and_leave_the_worker_dirs_alone(
    entrypoint: tuple[Path, dict[str, str]], command: tuple[str, ...]
) -> None:
    tmp_path, env = entrypoint
    pid, out = _run(env, *command)
    assert out == f"pid={pid} args={' '.join(command)}"
    assert len(list((tmp_path / "metrics").iterdir())) == 3


def test_an_absolute_command_runs_as_is(entrypoint: tuple[Path, dict[str, str]]) -> None:
    _, env = entrypoint
    _, out = _run(env, "/bin/echo", "hello")
    assert out == "hello"

"""Restarts on the embedded default, with the real ``calsync`` processes: a worker and ``serve`` find the data
dir's Redis again after ``calsync stop``; ``serve`` started first accepts changes; what was deferred while
Redis was away is enqueued by the worker's housekeeping pass, with no manual ``calsync reconcile``."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.cli.process import SCRIPT, base_environment, calsync, change_file, json_out
from tests.support import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TENANT = "acme"
OUTAGE_LINE = "Redis unreachable"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def env(tmp_path: Path) -> Iterator[dict[str, str]]:
    """The embedded default of a data dir of its own (SQLite, the data dir's redis-server), stopped at the end."""
    environment = {"CALSYNC_DATA_DIR": str(tmp_path / "data"), "CALSYNC_METRICS_PORT": str(_free_port()),
                   "CALSYNC_METRICS_DIR": str(tmp_path / "metrics"), "CALSYNC_HEARTBEAT_DIR": str(tmp_path / "beats"),
                   "CALSYNC_LOG_LEVEL": "INFO"}  # fmt: skip
    yield environment
    calsync("stop", env=environment)


@contextlib.contextmanager
def running(env: dict[str, str], log: Path, *args: str) -> Iterator[subprocess.Popen[bytes]]:
    """``calsync ARGS`` in its own session for the block (its output in ``log``), then SIGTERMed and reaped."""
    with open(log, "ab") as out:
        process = subprocess.Popen([SCRIPT, *args], env={**base_environment(), **env}, stdout=out,
                                   stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
    try:
        yield process
    except BaseException:
        print(log.read_text(errors="replace")[-5000:])
        raise
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


def _lines(log: Path) -> list[dict[str, Any]]:
    found = []
    for line in log.read_text(errors="replace").splitlines():
        with contextlib.suppress(ValueError):
            entry = json.loads(line)
            if isinstance(entry, dict):
                found.append(entry)
    return found


def _said(log: Path, message: str) -> list[dict[str, Any]]:
    return [entry for entry in _lines(log) if str(entry.get("message", "")).startswith(message)]


def _account(env: dict[str, str]) -> str:
    done = calsync("accounts", "add", "--tenant", TENANT, "--provider", "memory", "--address", "a@example.com", env=env)
    return str(json_out(done)["account_id"])


def _submit(env: dict[str, str], directory: Path, account: str, title: str) -> str:
    receipt = json_out(calsync("submit", "--tenant", TENANT, "--file", change_file(directory, account, title=title),
                               env=env))  # fmt: skip
    assert receipt["deferred_accounts"] == [], receipt
    return str(receipt["entity_id"])


def _synced(env: dict[str, str], entity: str) -> bool:
    shown = json_out(calsync("events", "show", entity, "--tenant", TENANT, "--json", env=env))
    return all(target["status"] == "synced" for target in shown["targets"])


def _wait_synced(env: dict[str, str], *entities: str) -> None:
    for entity in entities:
        wait_until(lambda e=entity: _synced(env, e), timeout=60, what=f"{entity} to be synced")  # type: ignore[misc]


def test_a_running_worker_finds_the_embedded_redis_again_after_calsync_stop(
    env: dict[str, str], tmp_path: Path
) -> None:
    account = _account(env)
    log = tmp_path / "worker.log"
    with running(env, log, "worker", "--processes", "1", "--threads", "2"):
        _wait_synced(env, _submit(env, tmp_path, account, "before the stop"))

        done = calsync("stop", env=env)
        stopped = json_out(done)
        assert stopped["stopped"] is True and len(stopped["workers_waiting"]) == 1  # named, on stderr too
        assert stopped["workers_waiting"][0] in done.stderr
        wait_until(lambda: _said(log, OUTAGE_LINE), timeout=30, what="the worker to say Redis is unreachable")
        # The next command that needs the queue starts the server again, at the same address.
        _wait_synced(env, _submit(env, tmp_path, account, "after the restart"))
        wait_until(lambda: json_out(calsync("status", "--json", env=env))["workers_active"] == 1, timeout=30,
                   what="calsync status to count the worker again")  # fmt: skip

    assert len(_said(log, OUTAGE_LINE)) == 1  # said once, not once per consumer and round
    assert len(_said(log, "Redis reachable again")) == 1
    assert [entry for entry in _lines(log) if entry.get("level") == "critical"] == []


def _post(api: httpx.Client, account: str, title: str) -> dict[str, Any]:
    event = {"title": title, "start": "2026-12-03T15:00", "end": "2026-12-03T16:00"}
    answer = api.post("/v1/changes", json={"operation": "upsert", "accounts": [account], "event": event})
    assert answer.status_code == 202, answer.text
    receipt: dict[str, Any] = answer.json()
    return receipt


def _ready(api: httpx.Client) -> bool:
    try:
        return api.get("/readyz").status_code == 200
    except httpx.TransportError:
        return False


def test_serve_started_first_accepts_changes_and_what_it_deferred_is_enqueued_without_a_command(
    env: dict[str, str], tmp_path: Path
) -> None:
    account = _account(env)
    key = json_out(calsync("api-keys", "create", "--tenant", TENANT, "--scope", "submit", env=env))["key"]
    port = _free_port()
    api = httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {key}"}, timeout=30)
    with running(env, tmp_path / "serve.log", "serve", "--host", "127.0.0.1", "--port", str(port)):
        # Before any worker (or any other command) ran: serve starts the data dir's Redis itself.
        wait_until(lambda: _ready(api), timeout=60, what="/readyz to answer 200")
        first = _post(api, account, "before any worker")
        assert first["deferred_accounts"] == [] and len(first["job_ids"]) == 1

        with running(env, tmp_path / "worker.log", "worker", "--processes", "1", "--threads", "2"):
            _wait_synced(env, first["entity_id"])

            assert json_out(calsync("stop", env=env))["stopped"] is True
            deferred = _post(api, account, "while Redis is stopped")
            assert deferred["deferred_accounts"] == [account] and deferred["job_ids"] == []

            # Any queue command starts Redis again; serve and the worker find it, and the worker's housekeeping
            # pass enqueues the deferred change (RECONCILE_AFTER is 600 s: only a target with no due time is taken).
            restarted = _submit(env, tmp_path, account, "restarts Redis")
            _wait_synced(env, restarted, deferred["entity_id"])
            wait_until(lambda: _ready(api), timeout=30, what="/readyz to answer 200 again")
            after = _post(api, account, "after the restart")
            assert after["deferred_accounts"] == []
            _wait_synced(env, after["entity_id"])

"""Heartbeats: the key, the file and the gauge while a worker runs; a stuck thread stops them; the
liveness probe command (documented in docs/METRICS.md) tells fresh from stale without Python."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import REGISTRY

from calsync.core.config.settings import Settings, load_settings, worker_environment
from calsync.core.model.errors import ConfigurationError
from calsync.core.worker.heartbeat import Heartbeat, Running, heartbeat_file, stuck
from calsync.core.worker.metrics import require_multiprocess
from calsync.providers.memory import MemoryProvider
from tests.support import Pipeline, probe_command, probe_script, wait_until

DOCS = Path(__file__).resolve().parents[2] / "docs" / "METRICS.md"


def _probe(directory: Path, max_age: float) -> int:
    return subprocess.run(probe_command(directory, max_age), capture_output=True, timeout=10).returncode


def _last_beat(heartbeat: Heartbeat) -> float | None:
    return REGISTRY.get_sample_value("calsync_worker_heartbeat_timestamp_seconds", {"worker": heartbeat.worker})


def _heartbeat(pipeline: Pipeline) -> Heartbeat:
    [middleware] = [m for m in pipeline.broker.middleware if isinstance(m, Heartbeat)]
    return middleware


def test_the_probe_passes_only_when_every_heartbeat_file_is_fresh(tmp_path: Path) -> None:
    assert _probe(tmp_path, 30) == 1  # no worker has booted yet
    fresh, stale = heartbeat_file(tmp_path, 10), heartbeat_file(tmp_path, 11)
    fresh.touch()
    assert _probe(tmp_path, 30) == 0
    stale.touch()
    old = time.time() - 31
    os.utime(stale, (old, old))
    assert _probe(tmp_path, 30) == 1
    stale.unlink()
    (tmp_path / "unrelated.txt").touch()
    os.utime(tmp_path / "unrelated.txt", (old, old))
    assert _probe(tmp_path, 30) == 0
    spaced = tmp_path / "with space"
    spaced.mkdir()
    heartbeat_file(spaced, 12).touch()
    assert _probe(spaced, 30) == 0


def test_the_documented_probe_is_the_one_the_code_renders() -> None:
    assert probe_script(Path("/tmp/calsync/heartbeats"), 30) in DOCS.read_text()


def test_a_message_is_stuck_only_past_its_time_limit_plus_the_grace() -> None:
    sync = Running("m1", "sync_calendar_event", started=100, time_limit=45)
    reconcile = Running("m2", "reconcile", started=90, time_limit=300)
    assert stuck([sync, reconcile], now=155, grace=10) is None
    assert stuck([sync, reconcile], now=155.5, grace=10) == sync
    assert stuck([reconcile], now=155.5, grace=10) is None
    assert stuck([reconcile], now=401, grace=10) == reconcile


def _key(heartbeat: Heartbeat) -> str:
    return heartbeat.keys.worker_heartbeat(heartbeat.worker)


def test_a_running_worker_beats_and_cleans_up_when_it_stops(settings_factory: Any) -> None:
    settings = settings_factory(heartbeat_interval=0.05, heartbeat_ttl=5)
    pipeline = Pipeline(settings)
    try:
        heartbeat = _heartbeat(pipeline)
        client = pipeline.clients.redis
        with pipeline.worker(threads=1):
            assert client.exists(_key(heartbeat)) and heartbeat.file.exists()
            assert 0 < client.pttl(_key(heartbeat)) <= 5000
            first = _last_beat(heartbeat)
            assert first is not None
            wait_until(lambda: _last_beat(heartbeat) != first, what="the next beat")
            assert _probe(settings.effective_heartbeat_dir, settings.heartbeat_ttl) == 0
        assert not client.exists(_key(heartbeat)) and not heartbeat.file.exists()
    finally:
        pipeline.close()


def test_a_stuck_worker_thread_stops_the_heartbeat(
    settings_factory: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = settings_factory(
        provider_timeout=0.2, job_time_limit=0.5, lock_ttl=5,  # stuck after twice the time limit: 1 s
        heartbeat_interval=0.1, heartbeat_ttl=0.5,
    )  # fmt: skip
    provider = MemoryProvider(settings.effective_memory_provider_path)
    # A call blocked in C (time.sleep): Dramatiq's TimeLimit cannot interrupt it, as with a hung socket.
    provider.add_fault(op="upsert", error=None, delay_ms=4000, times=1)
    pipeline = Pipeline(settings, provider=provider)
    try:
        heartbeat = _heartbeat(pipeline)
        with pipeline.worker(threads=1):
            pipeline.submit([pipeline.account()], title="hangs")
            stuck = wait_until(lambda: heartbeat.stuck, what="the stuck thread to be noticed")
            assert stuck.actor == "sync_calendar_event"
            wait_until(lambda: not pipeline.clients.redis.exists(_key(heartbeat)), what="the heartbeat key to expire")
            wait_until(lambda: _probe(settings.effective_heartbeat_dir, 1) != 0, what="the probe to fail")
            assert not heartbeat.beat()  # for good: the worker must be restarted
        assert "a worker thread is stuck" in caplog.text
    finally:
        pipeline.close()


def test_heartbeat_settings_must_leave_room_for_one_late_beat(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CALSYNC_HEARTBEAT_INTERVAL", "10")
    monkeypatch.setenv("CALSYNC_HEARTBEAT_TTL", "15")
    with pytest.raises(ConfigurationError, match="CALSYNC_HEARTBEAT_TTL must be at least twice"):
        load_settings()


def test_the_worker_environment_points_dramatiq_and_prometheus_client_at_one_directory(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, metrics_port=9300, metrics_host="127.0.0.1")
    env = worker_environment(settings)
    assert env["PROMETHEUS_MULTIPROC_DIR"] == env["dramatiq_prom_db"] == str(tmp_path / "prometheus")
    assert (env["dramatiq_prom_host"], env["dramatiq_prom_port"]) == ("127.0.0.1", "9300")


def test_a_worker_without_multiprocess_metrics_refuses_to_start(tmp_path: Path) -> None:
    # This test process imported prometheus_client without PROMETHEUS_MULTIPROC_DIR, like a badly started worker.
    with pytest.raises(ConfigurationError, match="PROMETHEUS_MULTIPROC_DIR"):
        require_multiprocess(Settings(data_dir=tmp_path))

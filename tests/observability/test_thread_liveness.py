"""A worker process that lost a worker thread is unhealthy: its heartbeat file stops (the liveness probe fails),
its heartbeat key and ``calsync status`` say how many threads are alive, and so does the gauge."""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path
from typing import Any

import dramatiq
import pytest
from prometheus_client import REGISTRY

from calsync.actors.cli.status import read_status, render
from calsync.core.observability.pipeline_state import StateReader, live_worker
from calsync.core.worker.heartbeat import Heartbeat, ThreadCount
from tests.support import Pipeline, probe_command, wait_until

pytestmark = [pytest.mark.integration]

KILLER = "test_kill_this_thread"


class KillsItsThread(dramatiq.Middleware):
    """Test only: an exception escaping a worker thread's loop, as from a message Dramatiq cannot post-process."""

    def __init__(self) -> None:
        self.killed: list[threading.Thread] = []

    def after_process_message(self, broker: dramatiq.Broker, message: dramatiq.MessageProxy, **_: Any) -> None:
        if message.actor_name == KILLER:
            self.killed.append(threading.current_thread())
            raise SystemExit("test: this worker thread dies")  # emit_after swallows only Exception


def _probe(directory: Path, max_age: float) -> int:
    return subprocess.run(probe_command(directory, max_age), capture_output=True, timeout=10).returncode


def _gauge(name: str, heartbeat: Heartbeat) -> float | None:
    return REGISTRY.get_sample_value(name, {"worker": heartbeat.worker})


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")  # the thread's death, on purpose
def test_a_worker_thread_that_dies_fails_the_liveness_probe(
    settings_factory: Any, caplog: pytest.LogCaptureFixture
) -> None:
    settings = settings_factory(heartbeat_interval=0.05, heartbeat_ttl=5)
    pipeline = Pipeline(settings)
    killer = KillsItsThread()
    pipeline.broker.add_middleware(killer)
    kill = dramatiq.actor(broker=pipeline.broker, queue_name=settings.queue, actor_name=KILLER)(lambda: None)
    [heartbeat] = [m for m in pipeline.broker.middleware if isinstance(m, Heartbeat)]
    directory = settings.effective_heartbeat_dir
    reader = StateReader(pipeline.clients)
    try:
        with pipeline.worker(threads=2):
            wait_until(lambda: _gauge("calsync_worker_threads_alive", heartbeat) == 2, what="two live threads")
            assert _gauge("calsync_worker_threads_configured", heartbeat) == 2
            assert _probe(directory, 1) == 0 and heartbeat.threads_lost is None
            assert [w.healthy for w in reader.read().workers or []] == [True]

            kill.send()
            wait_until(lambda: killer.killed and not killer.killed[0].is_alive(), what="the worker thread to die")
            assert wait_until(lambda: heartbeat.threads_lost, what="the loss to be noticed") == ThreadCount(1, 2)
            wait_until(lambda: _probe(directory, 1) != 0, what="the liveness probe to fail")
            assert _gauge("calsync_worker_threads_alive", heartbeat) == 1

            stored = json.loads(pipeline.clients.redis.get(heartbeat.keys.worker_heartbeat(heartbeat.worker)) or "{}")
            assert (stored["threads"], stored["threads_alive"]) == (2, 1)  # still renewed: status names it
            status = read_status(reader, pipeline.app.stats)
            [unhealthy] = [w for w in status.state.workers or [] if not w.healthy]
            assert (unhealthy.worker, unhealthy.threads_alive, unhealthy.threads) == (heartbeat.worker, 1, 2)
            doc = status.as_json()
            assert doc["workers"] == [{"worker": heartbeat.worker, "threads": 2, "threads_alive": 1, "healthy": False,
                                       "paused": False}]  # fmt: skip
            assert f"worker {heartbeat.worker} is unhealthy: 1 of 2" in _text(render(status))
            assert not heartbeat.beat()  # for good
        assert "worker threads died" in caplog.text
    finally:
        reader.close()
        pipeline.close()


def test_a_graceful_stop_is_not_a_lost_thread(settings_factory: Any) -> None:
    settings = settings_factory(heartbeat_interval=0.02, heartbeat_ttl=5)
    pipeline = Pipeline(settings)
    [heartbeat] = [m for m in pipeline.broker.middleware if isinstance(m, Heartbeat)]
    try:
        with pipeline.worker(threads=3):
            wait_until(lambda: _gauge("calsync_worker_threads_alive", heartbeat) == 3, what="three live threads")
        assert heartbeat.threads_lost is None
    finally:
        pipeline.close()


def test_a_heartbeat_value_is_read_back_whatever_it_holds() -> None:
    assert live_worker("h:1", b'{"worker": "h:1", "threads": 4, "threads_alive": 3}').healthy is False
    assert live_worker("h:1", b'{"worker": "h:1", "threads": 4, "threads_alive": 4}').healthy
    older = live_worker("h:2", b'{"worker": "h:2"}')  # written before threads were counted
    assert (older.worker, older.threads, older.healthy) == ("h:2", None, True)
    assert live_worker("h:3", b"not json").worker == "h:3"
    assert live_worker("h:4", b'{"threads": true, "threads_alive": "2"}').threads is None


def _text(renderable: Any) -> str:
    from rich.console import Console

    console = Console(width=200, record=True)
    console.print(renderable)
    return console.export_text()

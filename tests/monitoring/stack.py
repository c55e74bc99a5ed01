"""calsync as Prometheus scrapes it in production: a real ``calsync worker`` (every process), ``calsync exporter``
and ``calsync serve`` as subprocesses, and a real Prometheus loading the live rules (tests/monitoring/live.py).

The test process drives it like an operator and a producer would: it submits changes, pauses and resumes, breaks
the shared memory provider, signals the worker's processes, restarts the exporter.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from calsync.core.config.settings import Settings
from calsync.core.observability.pipeline_state import live_workers
from calsync.core.redis.pause import PauseSwitch
from calsync.providers.memory import MemoryProvider
from k8s.monitoring.source.params import DEFAULTS
from tests.monitoring.live import Prometheus, answers, live_rules
from tests.observability.conftest import CalsyncProcess
from tests.support import Pipeline, free_port, wait_until

API_JOB = "calsync-api"
# Test-scale timings of the stack: beats every 0.5 s, no housekeeping (it would re-enqueue a back-dated target
# before its alert fires), webhook endpoints disabled after two failures in a row; no bulk lane (the tests submit
# for one tenant, and which lane a job took would change which queue label an alert has).
STACK_SETTINGS: dict[str, Any] = {
    "bulk_threshold": 0,
    "heartbeat_interval": 0.5,
    "heartbeat_ttl": 3,
    "maintenance_interval": 0,
    "drift_interval": 300,  # sweeps on (the exporter's gauges with them); without housekeeping none is scheduled
    "webhook_allow_http": True,
    "webhook_allowed_networks": "127.0.0.0/8",
    "webhook_retry_schedule": (0.05,) * 6,
    "webhook_timeout": 2,
    "webhook_disable_after": 0.01,
    "webhook_disable_min_failures": 2,
    "secret_key": "XeyDGhcPmgrFLQFm6f7d4EVI97A3kAWsW6EkRlbw9ys=",
}


class Stack:
    """The calsync processes and the Prometheus scraping them; the pipeline drives them from the test."""

    def __init__(
        self,
        settings: Settings,
        directory: Path,
        *,
        worker_settings: Settings | None = None,
        alertmanager: str | None = None,
    ) -> None:
        self.settings = settings
        self.worker_settings = worker_settings or settings
        self.directory = directory
        self.provider = MemoryProvider(settings.effective_memory_provider_path)
        self.pipeline = Pipeline(settings, provider=self.provider)
        self.switch = PauseSwitch(self.pipeline.clients.redis, self.pipeline.clients.keys)
        self.exporter_port, self.api_port = free_port(), free_port()
        self.alertmanager = alertmanager
        self.worker: CalsyncProcess | None = None
        self.exporter: CalsyncProcess | None = None
        self.api: CalsyncProcess | None = None
        self.prometheus: Prometheus | None = None

    def start(self) -> None:
        """Start the processes, then Prometheus; returns once Prometheus scraped every target."""
        settings = self.settings
        self.start_worker()
        self.start_exporter()
        self.api = self._run(["serve", "--host", "127.0.0.1", "--port", str(self.api_port)], "api")
        targets = {
            DEFAULTS.worker_job: f"127.0.0.1:{settings.metrics_port}",
            DEFAULTS.exporter_job: f"127.0.0.1:{self.exporter_port}",
            API_JOB: f"127.0.0.1:{self.api_port}",
        }
        self.prometheus = Prometheus(
            self.directory / "prometheus", targets, rules=live_rules(), alertmanager=self.alertmanager
        )
        for job in targets:
            self.prometheus.wait_scraped(job)
        # Prometheus scrapes nothing for its first ~5 s (service discovery's update throttle), so the absent()
        # branch of CalsyncExporterDown goes pending at start (production's `for: 5m` outlasts it): let it clear.
        prometheus = self.prometheus
        wait_until(lambda: prometheus.alerts() == [], timeout=30, what="the start-up alerts to clear")

    @property
    def prom(self) -> Prometheus:
        """The running Prometheus."""
        assert self.prometheus is not None
        return self.prometheus

    def _run(self, args: list[str], name: str, settings: Settings | None = None) -> CalsyncProcess:
        return CalsyncProcess(settings or self.settings, args, self.directory / f"{name}.log")

    # --- the processes --------------------------------------------------------------------------
    def start_worker(self, settings: Settings | None = None) -> None:
        """``calsync worker`` with two processes of two threads, as one pod; waits until both beat."""
        args = ["worker", "--processes", "2", "--threads", "2"]
        self.worker = self._run(args, "worker", settings or self.worker_settings)
        wait_until(lambda: len(self.worker_pids()) == 2, timeout=60, what="two worker processes to beat")

    def worker_pids(self) -> list[int]:
        """The worker processes whose heartbeat file exists (``worker-<pid>.heartbeat``)."""
        directory = self.settings.effective_heartbeat_dir
        return (
            sorted(int(p.stem.split("-")[1]) for p in directory.glob("worker-*.heartbeat"))
            if directory.is_dir()
            else []
        )

    def kill_worker_pod(self) -> None:
        """SIGKILL the worker's whole process group: the pod is gone, nothing shuts down gracefully."""
        assert self.worker is not None
        os.killpg(self.worker.proc.pid, signal.SIGKILL)
        self.worker.proc.wait(timeout=30)
        for beat in self.settings.effective_heartbeat_dir.glob("*.heartbeat"):
            beat.unlink()  # what the next `calsync worker` would do; worker_pids() then lists the new processes

    def start_exporter(self, settings: Settings | None = None) -> None:
        """``calsync exporter`` on its port, answering."""
        args = ["exporter", "--host", "127.0.0.1", "--port", str(self.exporter_port)]
        self.exporter = self._run(args, "exporter", settings)
        wait_until(lambda: answers(f"http://127.0.0.1:{self.exporter_port}/metrics"), what="the exporter")

    def stop_exporter(self) -> None:
        """SIGTERM the exporter."""
        assert self.exporter is not None
        self.exporter.stop()

    # --- driving --------------------------------------------------------------------------------
    def pause(self) -> None:
        """``calsync pause``, returning once every worker process holds (each reads the switch about once a second)."""
        self.switch.pause("tests", "a monitoring scenario")
        client, keys = self.pipeline.clients.redis, self.pipeline.clients.keys
        wait_until(lambda: all(w.paused for w in live_workers(client, keys)), what="every worker to hold")

    def submit(self, count: int, account: str, **change: Any) -> list[str]:
        """Submit ``count`` changes for ``account``; their entity ids."""
        return [self.pipeline.submit([account], **change).entity_id for _ in range(count)]

    def output(self) -> str:
        """The processes' and Prometheus' logs (tails), for a failure message."""
        logs = sorted(self.directory.glob("*.log")) + sorted(self.directory.glob("*/*.log"))
        return "\n".join(f"--- {log.name}\n{log.read_text(errors='replace')[-3000:]}" for log in logs)

    def close(self) -> None:
        """Stop everything."""
        with contextlib.suppress(Exception):
            self.switch.resume()
        self.provider.clear_faults()
        for process in (self.prometheus, self.worker, self.exporter, self.api):
            if process is not None:
                process.stop()
        self.pipeline.close()


@contextlib.contextmanager
def running_stack(settings: Settings, directory: Path, **kwargs: Any) -> Iterator[Stack]:
    """A :class:`Stack` for the block; the logs are printed when the block fails."""
    stack = Stack(settings, directory, **kwargs)
    try:
        stack.start()
        yield stack
    except BaseException:
        print(stack.output())
        raise
    finally:
        stack.close()

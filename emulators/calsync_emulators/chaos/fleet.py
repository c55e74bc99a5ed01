"""The chaos run's worker processes: N real ``calsync worker`` commands, one SIGKILLed at a time and restarted.

Each is its own process group (Dramatiq's parent and its worker child), its own metrics port and directory, as
separate pods of one Deployment would be; the database, the broker and the calendars are shared. A SIGKILL
is a crash: no shutdown runs, the messages the process held are the broker's to give back (Redis: after the
broker heartbeat timeout; RabbitMQ: when the connection drops) and its target locks expire or are taken over.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from calsync.core.config.settings import ENV_PREFIX, Settings, child_environment
from calsync.core.worker.heartbeat import HEARTBEAT_SUFFIX
from calsync_emulators.harness.waiting import free_port, wait_until
from calsync_emulators.harness.workers import kill_group, start_worker, stop_group


class Fleet:
    """``size`` worker commands of ``threads`` threads each, logging to ``directory``/worker-N.log."""

    def __init__(self, settings: Settings, directory: Path, size: int, threads: int) -> None:
        self.settings = settings
        self.directory = directory
        self.threads = threads
        self.processes: list[subprocess.Popen[bytes] | None] = [None] * size
        self.kills = 0

    def start(self) -> None:
        """Start every worker command."""
        for n in range(len(self.processes)):
            self._start(n)

    def wait_ready(self, timeout: float) -> None:
        """Wait until every worker process has written its first heartbeat (it consumes from then on); before,
        a kill or an outage would hit a process still importing."""
        directory = self.settings.effective_heartbeat_dir
        wait_until(lambda: len(list(directory.glob(f"*{HEARTBEAT_SUFFIX}"))) >= len(self.processes),
                   timeout=timeout, what="every worker's first heartbeat")  # fmt: skip

    def kill_next(self) -> str:
        """SIGKILL the next worker in turn (its whole process group) and start it again; what was done."""
        n = self.kills % len(self.processes)
        process = self.processes[n]
        self.kills += 1
        if process is not None:
            kill_group(process)
        self._start(n)
        return f"worker {n} SIGKILLed (pid {process.pid if process else '-'}) and restarted"

    def exited(self) -> list[int]:
        """The workers that exited by themselves (not killed by the run): they should not."""
        return [n for n, p in enumerate(self.processes) if p is not None and p.poll() is not None]

    def stop(self) -> None:
        """Stop every worker as an operator would (SIGTERM, SIGKILL after a grace period)."""
        for process in self.processes:
            if process is not None:
                stop_group(process, timeout=30)

    def logs(self, tail: int = 3000) -> str:
        """The tail of every worker's log, for a failed run's report."""
        return "\n".join(f"--- {path.name}\n{path.read_text(errors='replace')[-tail:]}"
                         for path in sorted(self.directory.glob("worker-*.log")))  # fmt: skip

    def _start(self, n: int) -> None:
        env = child_environment(self.settings)
        env.update({f"{ENV_PREFIX}METRICS_PORT": str(free_port()),
                    f"{ENV_PREFIX}METRICS_DIR": str(self.directory / f"metrics-{n}")})  # fmt: skip
        log = self.directory / f"worker-{n}.log"
        self.processes[n] = start_worker(env, log, "--processes", "1", "--threads", str(self.threads))

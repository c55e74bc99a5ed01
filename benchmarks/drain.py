"""Watching a deployed worker drain its queue: the measured window, its CPU and its Redis commands.

Shared by benchmarks/worker.py and benchmarks/adapters.py: a worker started in a process group of its
own, the queue's message hash watched from 90 % of the jobs left to 10 %, the worker processes' CPU
(and an emulator's, apart) and the Redis commands sent over that window.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psutil
import redis

from benchmarks.support import tree_cpu

ROOT = Path(__file__).resolve().parent.parent
QUEUE = "calendar"
POLL_SECONDS = 0.005
DRAIN_TIMEOUT = 600.0


@dataclass(frozen=True)
class Shape:
    """Worker processes x threads per process."""

    processes: int
    threads: int

    def __str__(self) -> str:
        return f"{self.processes}x{self.threads}"


@dataclass(frozen=True)
class Drain:
    """One side's measured window (from 90 % of the jobs left to 10 %)."""

    name: str
    jobs: int  # jobs processed inside the window
    seconds: float
    cpu_seconds: float  # of every worker process, over the window
    emulator_cpu_seconds: float = 0.0  # of the provider emulator's process, over the window (adapters.py)
    redis_commands: int = 0  # the workers' commands over the window (the benchmark's own polls left out)
    requests: tuple[int, int] = (0, 0)  # provider requests (all, not answered 2xx) the emulator got over the window

    @property
    def rate(self) -> float:
        """Jobs per second."""
        return self.jobs / self.seconds

    @property
    def cpu_ms_per_job(self) -> float:
        """Worker CPU per job, in milliseconds."""
        return self.cpu_seconds / self.jobs * 1000

    @property
    def redis_commands_per_job(self) -> float:
        """Redis commands the workers sent per job."""
        return self.redis_commands / self.jobs

    @property
    def requests_per_job(self) -> tuple[float, float]:
        """Provider requests per job, all and those not answered 2xx (adapters.py)."""
        return self.requests[0] / self.jobs, self.requests[1] / self.jobs

    @property
    def emulator_cpu_ms_per_job(self) -> float:
        """The emulator's CPU per job, in milliseconds (reported apart: it is not calsync's)."""
        return self.emulator_cpu_seconds / self.jobs * 1000


@contextmanager
def running(command: list[str], env: dict[str, str], log: Path,
             cwd: Path = ROOT) -> Iterator[subprocess.Popen[bytes]]:  # fmt: skip
    """A worker started in its own process group, stopped with SIGTERM (then SIGKILL) at the end."""
    with open(log, "ab") as out:
        proc = subprocess.Popen(command, env=env, cwd=cwd, stdout=out, stderr=out, start_new_session=True)
    try:
        yield proc
    finally:
        with_group = os.getpgid(proc.pid)
        os.killpg(with_group, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(with_group, signal.SIGKILL)
            proc.wait()


def redis_commands(client: redis.Redis) -> int:
    return int(client.info("stats")["total_commands_processed"])


def drain(name: str, client: redis.Redis, ns: str, jobs: int,
          proc: subprocess.Popen[bytes] | Sequence[subprocess.Popen[bytes]], emulator: psutil.Process | None = None,
          served: Callable[[], tuple[int, int]] | None = None) -> Drain:  # fmt: skip
    """Watch the queue's message hash (queued + unacked) fall from 90 % to 10 % of ``jobs``.

    ``proc``: the worker, or several (separate ``calsync worker`` pods): their CPU is added up.
    ``served``: the emulator's request counts (all, not 2xx), read at both ends of the window after the CPU.
    """
    procs = [proc] if isinstance(proc, subprocess.Popen) else list(proc)
    workers = [psutil.Process(p.pid) for p in procs]
    key = f"{ns}:{QUEUE}.msgs"
    high, low = jobs * 0.9, jobs * 0.1
    deadline = time.monotonic() + DRAIN_TIMEOUT
    started = cpu = emulator_cpu = 0.0
    left_at_start = jobs
    commands = polls = 0
    requests = (0, 0)
    while True:
        left = int(client.hlen(key))
        polls += 1
        now = time.perf_counter()
        if not started and left <= high:
            started, cpu, left_at_start = now, sum(map(tree_cpu, workers)), left
            emulator_cpu = tree_cpu(emulator) if emulator else 0.0
            commands, polls = redis_commands(client), 0
            requests = served() if served else (0, 0)
        if started and left <= low:
            emulator_cpu = tree_cpu(emulator) - emulator_cpu if emulator else 0.0
            sent = redis_commands(client) - commands - polls - 1  # less our HLENs and the first INFO
            cpu = sum(map(tree_cpu, workers)) - cpu
            if served:
                total, failed = served()
                requests = (total - requests[0], failed - requests[1])
            return Drain(name, left_at_start - left, now - started, cpu, emulator_cpu, sent, requests)
        if any(p.poll() is not None for p in procs):
            raise RuntimeError(f"{name}: the worker exited before the queue drained (see its log)")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{name}: {left} of {jobs} jobs still queued after {DRAIN_TIMEOUT:.0f} s")
        time.sleep(POLL_SECONDS)

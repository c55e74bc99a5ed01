"""Worker heartbeats: each worker process proves every ``HEARTBEAT_INTERVAL`` that it is alive and not stuck.

A thread started at worker boot, in every worker process, each interval:

- sets the Redis key ``<ns>:heartbeat:<host>:<pid>`` with a TTL of ``HEARTBEAT_TTL`` and lists the process in
  ``<ns>:workers`` (core/redis/live_workers.py; counted by the exporter as ``calsync_workers_active``; both
  removed at graceful shutdown);
- touches ``HEARTBEAT_DIR/worker-<pid>.heartbeat``, whose mtime the Kubernetes liveness probe checks
  without starting Python (k8s/base/worker.yaml; the dir is emptied by ``calsync worker`` at start);
- sets ``calsync_worker_heartbeat_timestamp_seconds{worker="<host>:<pid>"}``.

It also watches the messages running on the process' worker threads. Dramatiq's TimeLimit
interrupts a job at its time limit, but only between Python bytecodes: a thread blocked in C code or
a syscall stays blocked (docs/notes/dramatiq-worker.md). When a message has run longer than its time
limit plus ``JOB_TIME_LIMIT`` (twice the limit for a job on the default), its thread is stuck: the
heartbeat stops for good (logged at CRITICAL with the message), the key expires, the file goes stale,
and the probe restarts the pod.
A Redis outage does not stop the file: restarting a healthy worker would not bring Redis back.

It counts the process' live worker threads too. A worker thread that died (an exception escaping
Dramatiq's loop, e.g. from a message it could not post-process) never comes back, and the process
would keep consuming with fewer threads, or none, while looking alive. With fewer threads alive than
configured, the file is no longer touched (the probe fails: the pod is restarted), logged at CRITICAL
once; the key goes on being renewed with ``threads_alive`` < ``threads``, so ``calsync status`` names
the process, and ``calsync_worker_threads_alive`` drops below ``calsync_worker_threads_configured``.
The key's ``paused`` is true once every consumer of the process holds for ``calsync pause`` (pause.py).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import dramatiq
import redis

from calsync.core.config.settings import Settings
from calsync.core.messaging.outage import RedisWatch
from calsync.core.redis import live_workers
from calsync.core.redis.keys import RedisKeys
from calsync.core.redis.periodic import start_repeating
from calsync.core.worker.metrics import (
    WORKER_HEARTBEAT,
    WORKER_THREADS_ALIVE,
    WORKER_THREADS_CONFIGURED,
    calsync_version,
    worker_id,
)
from calsync.core.worker.pause import PauseGate

log = logging.getLogger(__name__)

HEARTBEAT_SUFFIX = ".heartbeat"


def heartbeat_file(directory: Path, pid: int) -> Path:
    """The file one worker process touches on every beat."""
    return directory / f"worker-{pid}{HEARTBEAT_SUFFIX}"


@dataclass(frozen=True)
class Running:
    """A message on a worker thread: since when (monotonic), and its time limit in seconds."""

    message_id: str
    actor: str
    started: float
    time_limit: float


def stuck(running: Iterable[Running], now: float, grace: float) -> Running | None:
    """The longest-running of ``running`` past its time limit plus ``grace``, if any: a stuck thread."""
    late = [r for r in running if now - r.started > r.time_limit + grace]
    return min(late, key=lambda r: r.started, default=None)


@dataclass(frozen=True)
class ThreadCount:
    """How many of a worker process' worker threads are alive, of how many it was started with."""

    alive: int
    configured: int


class Heartbeat(dramatiq.Middleware):
    """Runs this worker process' heartbeat thread and tracks the messages running on its worker threads."""

    def __init__(
        self, client: redis.Redis, keys: RedisKeys, settings: Settings, pause: PauseGate, watch: RedisWatch
    ) -> None:
        self.redis = client
        self.keys = keys
        self.settings = settings  # HEARTBEAT_INTERVAL, HEARTBEAT_TTL, HEARTBEAT_DIR, JOB_TIME_LIMIT
        self.pause = pause
        self.watch = watch  # an unreachable Redis is reported there (once per outage), not logged every beat
        self.worker = worker_id()
        self.stuck: Running | None = None  # set for good when a worker thread is stuck
        self.threads_lost: ThreadCount | None = None  # set for good when a worker thread died
        self._running: dict[int, Running] = {}  # by worker thread
        self._worker: dramatiq.Worker | None = None
        self._stopping = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._started_at = time.time()

    @property
    def file(self) -> Path:
        """This process' heartbeat file."""
        return heartbeat_file(self.settings.effective_heartbeat_dir, os.getpid())

    def before_process_message(self, broker: dramatiq.Broker, message: dramatiq.MessageProxy) -> None:
        # The door (core/messaging/quarantine.py) admits no message for an actor the broker does not declare.
        limit_ms = message.options.get("time_limit") or broker.get_actor(message.actor_name).options.get("time_limit")
        limit = limit_ms / 1000 if limit_ms else self.settings.job_time_limit
        running = Running(message.message_id, message.actor_name, time.monotonic(), limit)
        self._running[threading.get_ident()] = running

    def after_process_message(self, broker: dramatiq.Broker, message: dramatiq.MessageProxy, **outcome: object) -> None:
        self._running.pop(threading.get_ident(), None)

    after_skip_message = after_process_message

    def before_worker_boot(self, broker: dramatiq.Broker, worker: dramatiq.Worker) -> None:
        # Beat once before the worker threads start: the locks their first jobs take then name a live
        # owner and can be taken over if this process dies (core/redis/locks.py).
        self.worker = worker_id()  # the pid of the worker process, not of a parent that built the broker
        self.beat()

    def after_worker_boot(self, broker: dramatiq.Broker, worker: dramatiq.Worker) -> None:
        self.worker = worker_id()
        self._started_at = time.time()
        self._worker = worker
        self._stopping = False
        self._stop.clear()
        self.beat()
        failure = "heartbeat failed; trying again next interval"
        self._thread = start_repeating(
            "calsync-heartbeat", self._stop, self.settings.heartbeat_interval, self.beat, log=log, failure=failure
        )

    def before_worker_shutdown(self, broker: dramatiq.Broker, worker: dramatiq.Worker) -> None:
        self._stopping = True  # threads now end on purpose: not a loss

    def after_worker_shutdown(self, broker: dramatiq.Broker, worker: dramatiq.Worker) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.settings.heartbeat_interval + 5)
            self._thread = None
        forget = functools.partial(live_workers.remove, self.redis, self.keys, self.worker)
        self._redis("delete the heartbeat key; it expires by itself", forget)
        self.file.unlink(missing_ok=True)

    def beat(self) -> bool:
        """Renew the key, the file and the gauge, unless a worker thread is stuck (then never again)."""
        if self.stuck is None:
            self.stuck = stuck(self._running.copy().values(), time.monotonic(), self.settings.job_time_limit)
            if (late := self.stuck) is not None:
                running = round(time.monotonic() - late.started, 1)
                fields = {"message_id": late.message_id, "job_type": late.actor, "running_seconds": running,
                          "time_limit_seconds": late.time_limit, "worker": self.worker}  # fmt: skip
                log.critical(
                    "a worker thread is stuck: heartbeat stopped so that the liveness probe restarts this worker",
                    extra={"fields": fields},
                )
        if self.stuck is not None:
            return False
        now = time.time()
        value: dict[str, object] = {
            "worker": self.worker,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "version": calsync_version(),
            "started_at": self._started_at,
            "beat_at": now,
        }
        if self._worker is not None:
            threads = self._count_threads(self._worker)
            value.update(threads=threads.configured, threads_alive=threads.alive)
            value["paused"] = self.pause.paused_on(self._worker.consumers)  # every consumer holds
        ttl = int(self.settings.heartbeat_ttl * 1000)
        renew = functools.partial(live_workers.renew, self.redis, self.keys, self.worker, json.dumps(value), ttl_ms=ttl)
        self._redis("renew the heartbeat key", renew)
        if self.threads_lost is not None:
            return False
        try:
            self.file.parent.mkdir(parents=True, exist_ok=True)
            self.file.touch()
        except OSError:
            log.warning("could not touch the heartbeat file", exc_info=True, extra={"fields": {"path": str(self.file)}})
        WORKER_HEARTBEAT.labels(self.worker).set(now)
        return True

    def _count_threads(self, worker: dramatiq.Worker) -> ThreadCount:
        workers: list[threading.Thread] = list(worker.workers)
        threads = ThreadCount(sum(1 for t in workers if t.is_alive()), int(worker.worker_threads))
        WORKER_THREADS_ALIVE.labels(self.worker).set(threads.alive)
        WORKER_THREADS_CONFIGURED.labels(self.worker).set(threads.configured)
        if self.threads_lost is None and threads.alive < threads.configured and not self._stopping:
            self.threads_lost = threads
            fields = {"threads_alive": threads.alive, "threads": threads.configured, "worker": self.worker}
            log.critical(
                "worker threads died: heartbeat file stopped so that the liveness probe restarts this worker",
                extra={"fields": fields},
            )
        return threads

    def _redis(self, what: str, command: Callable[[], object]) -> None:
        # An outage is said once, by the worker's RedisWatch; another Redis error is logged here.
        try:
            command()
        except redis.ConnectionError as exc:
            self.watch.lost(exc)
            return
        except redis.RedisError:
            log.warning("could not %s", what, exc_info=True)
            return
        self.watch.answered()

"""Point-in-time readings of the pipeline's state, shared by the queue exporter and ``calsync status``.

Three sources, each read on its own so that one being down does not hide the others:

- **broker** (queues). Redis: one Lua script reads, atomically, ``LLEN <ns>:<q>`` (ready),
  ``HLEN <ns>:<q>.msgs`` (ready + fetched-but-unacked), ``HLEN <ns>:<q>.DQ.msgs`` (delayed: workers
  hold delayed messages in memory, so ``LLEN <q>.DQ`` reads 0 while they run) and the body of the
  head of the ready list. In-flight = ``.msgs`` minus ready, which includes messages held by a dead
  worker until Dramatiq's maintenance requeues them. RabbitMQ: a passive ``queue.declare`` gives
  only the ready count; delayed messages sit unacked in worker memory and unacked counts need the
  management API, so delayed, in-flight and oldest age are reported as unavailable (None).
- **database**: open dead letters by job type and reason, the oldest open one, targets by sync
  status and the most overdue pending target.
- **redis**: the circuit breakers and provider back-off of every provider with a breaker (core/redis/traffic.py);
  live worker heartbeat keys (``<ns>:heartbeat:*``, each with a TTL), counted with SCAN; their
  values tell each process' live worker threads against its configured count (a process that lost
  threads is unhealthy, core/worker/heartbeat.py).

The oldest ready message's age counts from when it became ready, not from its creation: the latest
of its ``message_timestamp``, its ``eta`` option and, for sync jobs, the payload's ``scheduled_at``.
A retry keeps its original ``message_timestamp``, and Dramatiq drops ``eta`` when it moves a due
message from the delay queue to the ready list (``worker.py`` ``handle_delayed_messages``), so the
payload's ``scheduled_at`` (set to the retry's due time) is what dates a retried sync job. The head of
the list is the oldest except for requeued messages, which Dramatiq pushes to the tail.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import redis

from calsync.core.config.settings import broker_kind
from calsync.core.messaging.lanes import lanes_of
from calsync.core.messaging.messages import RECONCILE_JOB
from calsync.core.model.intake import INTAKE_JOB
from calsync.core.model.payload import SYNC_JOB
from calsync.core.model.vocabulary import SYNC_STATUSES, WEBHOOK_DELIVERY_STATUSES
from calsync.core.redis.traffic import CircuitReading, TrafficStore
from calsync.core.store import dead_letters, targets
from calsync.core.webhooks import count_deliveries, count_disabled

if TYPE_CHECKING:
    from calsync.core.runtime import Runtime

T = TypeVar("T")

JOB_TYPES = (SYNC_JOB, INTAKE_JOB, RECONCILE_JOB)
SOURCES = ("broker", "database", "redis")

_QUEUE_SCRIPT = """
local ready = redis.call('LLEN', KEYS[1])
local unacked = redis.call('HLEN', KEYS[2])
local delayed = redis.call('HLEN', KEYS[3])
local head = redis.call('LINDEX', KEYS[1], 0)
local body = ''
if head then body = redis.call('HGET', KEYS[2], head) or '' end
return {ready, unacked, delayed, body}
"""
_SCAN_BATCH = 1000
_RABBITMQ_TIMEOUT_S = 5


@dataclass(frozen=True)
class QueueReading:
    """One queue's depth; None where the broker cannot tell."""

    queue: str
    ready: int
    delayed: int | None
    inflight: int | None
    oldest_age_seconds: float | None

    def as_json(self) -> dict[str, Any]:
        """JSON-ready form for ``calsync status --json``."""
        return {
            "queue": self.queue,
            "ready": self.ready,
            "delayed": self.delayed,
            "inflight": self.inflight,
            "oldest_age_seconds": _rounded(self.oldest_age_seconds),
        }


@dataclass(frozen=True)
class StoreReading:
    """What the database says about dead letters and sync targets."""

    dead_letters_open: dict[tuple[str, str], int]
    dead_letter_oldest_age_seconds: float
    targets: dict[str, int]
    pending_oldest_age_seconds: float
    # Webhook endpoints disabled, by who (auto: the breaker; operator), and deliveries by status.
    webhook_endpoints_disabled: dict[str, int] = field(default_factory=lambda: {"auto": 0, "operator": 0})
    webhook_deliveries: dict[str, int] = field(default_factory=dict)

    def open_by_job_type(self) -> dict[str, int]:
        """Open dead letters per job type, every known job type included (a zero is a series too)."""
        counts = dict.fromkeys(JOB_TYPES, 0)
        for (job_type, _reason), n in self.dead_letters_open.items():
            counts[job_type] = counts.get(job_type, 0) + n
        return counts

    def open_by_reason(self) -> dict[str, int]:
        """Open dead letters per DLQ reason."""
        counts: dict[str, int] = {}
        for (_job_type, reason), n in sorted(self.dead_letters_open.items()):
            counts[reason] = counts.get(reason, 0) + n
        return counts

    def as_json(self) -> dict[str, Any]:
        """JSON-ready form for ``calsync status --json``."""
        return {
            "dead_letters": {
                "open": sum(self.dead_letters_open.values()),
                "open_by_reason": self.open_by_reason(),
                "open_by_job_type": self.open_by_job_type(),
                "oldest_age_seconds": _rounded(self.dead_letter_oldest_age_seconds),
            },
            "targets": {
                "by_status": self.targets,
                "pending_oldest_age_seconds": _rounded(self.pending_oldest_age_seconds),
            },
            "webhooks": {"endpoints_disabled": self.webhook_endpoints_disabled, "deliveries": self.webhook_deliveries},
        }


@dataclass(frozen=True)
class WorkerReading:
    """One live worker process as its heartbeat key describes it (threads unknown for older workers)."""

    worker: str
    threads: int | None
    threads_alive: int | None
    paused: bool | None = None  # every consumer holding for `calsync pause` (None: an older worker's key)

    @property
    def healthy(self) -> bool:
        """No worker thread known to be dead."""
        return self.threads is None or self.threads_alive is None or self.threads_alive >= self.threads

    def as_json(self) -> dict[str, Any]:
        """JSON-ready form for ``calsync status --json``."""
        return {"worker": self.worker, "threads": self.threads, "threads_alive": self.threads_alive,
                "healthy": self.healthy, "paused": self.paused}  # fmt: skip


def _count_field(doc: dict[str, Any], name: str) -> int | None:
    value = doc.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def worker_reading(key: str, raw: bytes | str | None) -> WorkerReading:
    """A heartbeat key's value read back (a value that is not the JSON the heartbeat writes reads as unknown)."""
    try:
        doc = json.loads(raw) if raw else {}
    except ValueError:
        doc = {}
    doc = doc if isinstance(doc, dict) else {}
    name = doc.get("worker") if isinstance(doc.get("worker"), str) else key.rsplit(":heartbeat:", 1)[-1]
    paused = doc.get("paused") if isinstance(doc.get("paused"), bool) else None
    return WorkerReading(str(name), _count_field(doc, "threads"), _count_field(doc, "threads_alive"), paused)


@dataclass(frozen=True)
class Reading:
    """Everything read at one moment; a source that failed is None, with its error in ``errors``."""

    at: float
    queues: list[QueueReading] | None
    store: StoreReading | None
    workers_active: int | None
    errors: dict[str, str] = field(default_factory=dict)
    workers: list[WorkerReading] | None = None
    circuits: list[CircuitReading] | None = None

    @property
    def workers_unhealthy(self) -> list[WorkerReading] | None:
        """Live worker processes with fewer worker threads alive than configured."""
        return None if self.workers is None else [w for w in self.workers if not w.healthy]

    def source_up(self, source: str) -> bool:
        """Whether ``source`` (broker, database, redis) could be read."""
        return source not in self.errors


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _age(since: dt.datetime | None, now: float) -> float:
    return max(0.0, now - since.timestamp()) if since is not None else 0.0


def ready_since(body: dict[str, Any]) -> float | None:
    """Unix time at which a message became ready to run (see the module docstring)."""
    candidates: list[float] = []
    if isinstance(body.get("message_timestamp"), int | float):
        candidates.append(body["message_timestamp"] / 1000)
    options = body.get("options")
    if isinstance(options, dict) and isinstance(options.get("eta"), int | float):
        candidates.append(options["eta"] / 1000)
    args = body.get("args")
    if isinstance(args, list) and args and isinstance(args[0], dict) and isinstance(args[0].get("scheduled_at"), str):
        with contextlib.suppress(ValueError):
            candidates.append(dt.datetime.fromisoformat(args[0]["scheduled_at"]).timestamp())
    return max(candidates, default=None)


class StatusReader:
    """Reads queues, the database and heartbeats for one runtime (the exporter keeps one for its life)."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.settings = runtime.settings
        self.keys = runtime.keys
        self._broker_redis: redis.Redis | None = None
        self._traffic: TrafficStore | None = None

    def read(self) -> Reading:
        """Read every source, recording failures instead of raising."""
        now = time.time()
        errors: dict[str, str] = {}
        queues = self._guarded("broker", errors, lambda: self.queues(now))
        store = self._guarded("database", errors, lambda: self.store(now))
        workers = self._guarded("redis", errors, self.workers)
        circuits = self._guarded("redis", errors, self.circuits)
        return Reading(now, queues, store, None if workers is None else len(workers), errors, workers, circuits)

    @staticmethod
    def _guarded(source: str, errors: dict[str, str], read: Callable[[], T]) -> T | None:
        try:
            return read()
        except Exception as exc:
            errors[source] = f"{type(exc).__name__}: {exc}"
            return None

    # --- broker ---------------------------------------------------------------------------------

    def queues(self, now: float) -> list[QueueReading]:
        """The depth of every queue calsync consumes."""
        consumed = tuple(dict.fromkeys((*lanes_of(self.settings).queues, self.settings.intake_queue,
                                        self.settings.webhook_queue)))  # fmt: skip
        if broker_kind(self.runtime.broker_url) == "rabbitmq":
            url = self.runtime.broker_url
            return [QueueReading(queue, _rabbitmq_ready(url, queue), None, None, None) for queue in consumed]
        return [self._redis_queue(queue, now) for queue in consumed]

    def _redis_queue(self, queue: str, now: float) -> QueueReading:
        if self._broker_redis is None:
            if self.runtime.broker_url == self.runtime.redis_url:
                self._broker_redis = self.runtime.redis
            else:
                self._broker_redis = redis.Redis.from_url(self.runtime.broker_url)
        client = self._broker_redis
        keys = [self.keys.ready_queue(queue), self.keys.queue_messages(queue), self.keys.delayed_messages(queue)]
        ready, unacked, delayed, head = client.eval(_QUEUE_SCRIPT, len(keys), *keys)
        oldest = 0.0
        if head:
            since = ready_since(json.loads(head))
            oldest = max(0.0, now - since) if since is not None else 0.0
        return QueueReading(queue, int(ready), int(delayed), max(0, int(unacked) - int(ready)), oldest)

    # --- database -------------------------------------------------------------------------------

    def store(self, now: float) -> StoreReading:
        """Dead letters and targets, in one read transaction."""
        with self.runtime.db.read() as conn:
            open_counts = dead_letters.open_counts(conn)
            oldest_failure = dead_letters.oldest_open_failed_at(conn)
            by_status = targets.count_by_status(conn)
            oldest_due = targets.oldest_pending_due(conn)
            disabled = count_disabled(conn)
            deliveries = count_deliveries(conn)
        return StoreReading(
            dead_letters_open=open_counts,
            dead_letter_oldest_age_seconds=_age(oldest_failure, now),
            targets={status: by_status.get(status, 0) for status in SYNC_STATUSES},
            pending_oldest_age_seconds=_age(oldest_due, now),
            webhook_endpoints_disabled=disabled,
            webhook_deliveries={status: deliveries.get(status, 0) for status in WEBHOOK_DELIVERY_STATUSES},
        )

    # --- traffic control -----------------------------------------------------------------------

    def circuits(self) -> list[CircuitReading]:
        """The breakers of every provider that has them (BREAKER_FAILURES above 0)."""
        if self._traffic is None:
            self._traffic = TrafficStore(self.runtime.redis, self.keys)
        traffic = self._traffic
        return [traffic.circuits(name) for name, failures in sorted(self.settings.breaker_failures.items()) if failures]

    # --- heartbeats -----------------------------------------------------------------------------

    def workers_active(self) -> int:
        """Worker processes whose heartbeat key has not expired."""
        return sum(1 for _ in self.runtime.redis.scan_iter(match=self.keys.worker_heartbeats(), count=_SCAN_BATCH))

    def workers(self) -> list[WorkerReading]:
        """Every worker process whose heartbeat key has not expired, with its worker threads."""
        client = self.runtime.redis
        keys = sorted(k.decode() if isinstance(k, bytes) else str(k)
                      for k in client.scan_iter(match=self.keys.worker_heartbeats(), count=_SCAN_BATCH))  # fmt: skip
        values = client.mget(keys) if keys else []
        # A key that expired between SCAN and MGET is no longer a live worker.
        return [worker_reading(key, raw) for key, raw in zip(keys, values, strict=True) if raw is not None]

    def close(self) -> None:
        """Release the broker's Redis connection when it is not the runtime's."""
        if self._broker_redis is not None and self._broker_redis is not self.runtime.redis:
            self._broker_redis.close()


def _rabbitmq_ready(url: str, queue: str) -> int:
    import pika
    from pika.exceptions import ChannelClosedByBroker

    parameters = pika.URLParameters(url)
    parameters.socket_timeout = _RABBITMQ_TIMEOUT_S
    parameters.blocked_connection_timeout = _RABBITMQ_TIMEOUT_S
    connection = pika.BlockingConnection(parameters)
    try:
        try:
            declared = connection.channel().queue_declare(queue=queue, passive=True)
        except ChannelClosedByBroker as exc:
            if exc.reply_code == 404:  # no worker has declared the queue yet
                return 0
            raise
        return int(declared.method.message_count)
    finally:
        if connection.is_open:
            connection.close()

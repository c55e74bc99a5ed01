"""The pipeline's state at one moment, shared by the queue exporter and ``calsync status``.

Three sources, each read on its own so that one being down does not hide the others:

- **broker** (queues). Redis: one Lua script (``queue_depth.lua``) reads, atomically, ``LLEN <ns>:<q>``
  (ready), ``HLEN <ns>:<q>.msgs`` (ready + fetched-but-unacked), ``HLEN <ns>:<q>.DQ.msgs`` (delayed: workers
  hold delayed messages in memory, so ``LLEN <q>.DQ`` reads 0 while they run) and the body of the
  head of the ready list. In-flight = ``.msgs`` minus ready, which includes messages held by a dead
  worker until Dramatiq's maintenance requeues them. RabbitMQ: a passive ``queue.declare`` gives
  only the ready count; delayed messages sit unacked in worker memory and unacked counts need the
  management API, so delayed, in-flight and oldest age are reported as unavailable (None).
- **database**: open dead letters by job type and reason, the oldest open one, outstanding targets
  (pending, failed) and the most overdue pending target, webhook endpoints disabled and outstanding deliveries,
  the oldest drift sweep and the sweeps overdue.
- **redis**: the circuit breakers and provider back-off of every provider with a breaker (core/traffic/store.py);
  live worker heartbeat keys (``<ns>:heartbeat:<worker>``, each with a TTL), found through the set of worker
  names (core/redis/live_workers.py: a cost per worker, not per key in the Redis); their values tell each
  process' live worker threads against its configured count (a process that lost threads is unhealthy,
  core/worker/heartbeat.py).

The oldest ready message's age counts from when it became ready, not from its creation: the latest
of its ``message_timestamp``, its ``eta`` option and, for sync jobs, the payload's ``scheduled_at``.
A retry keeps its original ``message_timestamp``, and Dramatiq drops ``eta`` when it moves a due
message from the delay queue to the ready list (``worker.py`` ``handle_delayed_messages``), so the
payload's ``scheduled_at`` (set to the retry's due time) is what dates a retried sync job. The head of
the list is the oldest except for requeued messages, which Dramatiq pushes to the tail.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import json
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import redis
from pydantic import BaseModel, ConfigDict, computed_field
from sqlalchemy import Connection

from calsync.core.clients import Clients, open_redis
from calsync.core.config.settings import Settings, broker_kind
from calsync.core.drift import store as drift_store
from calsync.core.messaging.lanes import lanes_of
from calsync.core.messaging.messages import JOB_TYPES
from calsync.core.model.vocabulary import OUTSTANDING_DELIVERY_STATUSES, OUTSTANDING_STATUSES
from calsync.core.redis.keys import RedisKeys
from calsync.core.redis.live_workers import read as live_workers_in
from calsync.core.redis.scripts import LuaScript
from calsync.core.store import dead_letters, targets
from calsync.core.traffic import CircuitReading, TrafficStore
from calsync.core.webhooks import count_deliveries, count_disabled

T = TypeVar("T")

SOURCES = ("broker", "database", "redis")

_RABBITMQ_TIMEOUT_S = 5


def consumed_queues(settings: Settings) -> tuple[str, ...]:
    """Every queue a worker consumes (``calsync worker``'s ``--queues``), each once: what the state shows."""
    queues = (*lanes_of(settings).queues, settings.intake_queue, settings.webhook_queue, settings.effective_drift_queue)
    return tuple(dict.fromkeys(queues))


@dataclass(frozen=True)
class QueueDepth:
    """One queue's depth; None where the broker cannot tell."""

    queue: str
    ready: int
    delayed: int | None
    inflight: int | None
    oldest_age_seconds: float | None


@dataclass(frozen=True)
class DeadLetterCounts:
    """Open dead letters: how many, by reason, by job type (each known one: a zero is a series too), the oldest age."""

    open: int
    open_by_reason: dict[str, int]
    open_by_job_type: dict[str, int]
    oldest_age_seconds: float


@dataclass(frozen=True)
class TargetCounts:
    """Outstanding sync targets (pending, failed) by status, and how long the most overdue pending one has been due.

    Synced and deleted targets are not counted: their number grows with history, and counting it read the whole
    table on every reading (docs/notes/scale.md); ``calsync_jobs_total`` counts the syncs as they happen."""

    by_status: dict[str, int]
    pending_oldest_age_seconds: float


@dataclass(frozen=True)
class WebhookCounts:
    """Webhook endpoints disabled, by who (auto: the breaker; operator), and deliveries pending or failed."""

    endpoints_disabled: dict[str, int]
    deliveries: dict[str, int]


@dataclass(frozen=True)
class DriftCounts:
    """How far drift verification is behind: the age of the least recent sweep among the accounts sweeps are owed to
    (0 when none was swept yet), and how many accounts' sweeps are overdue by more than an interval, unclaimed.
    Both 0 while sweeps are off (CALSYNC_DRIFT_INTERVAL=0)."""

    sweep_age_seconds: float
    sweeps_overdue: int


@dataclass(frozen=True)
class StoreCounts:
    """What the database says (in the shape of ``calsync status --json``)."""

    dead_letters: DeadLetterCounts
    targets: TargetCounts
    webhooks: WebhookCounts
    drift: DriftCounts


class LiveWorker(BaseModel):
    """One live worker process as its heartbeat key describes it (threads unknown for older workers)."""

    model_config = ConfigDict(frozen=True, strict=True)

    worker: str
    threads: int | None = None
    threads_alive: int | None = None
    paused: bool | None = None  # every consumer holding for `calsync pause` (None: an older worker's key)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def healthy(self) -> bool:
        """No worker thread known to be dead."""
        return self.threads is None or self.threads_alive is None or self.threads_alive >= self.threads


def live_worker(name: str, raw: bytes | str | None) -> LiveWorker:
    """A heartbeat key's value read back; one that is not the JSON the heartbeat writes reads as unknown."""
    try:
        return LiveWorker.model_validate({"worker": name, **json.loads(raw or "{}")})
    except (ValueError, TypeError):  # not JSON, not an object, or a field of another type
        return LiveWorker(worker=name)


def live_workers(client: redis.Redis, keys: RedisKeys) -> list[LiveWorker]:
    """Every worker process whose heartbeat key (on ``client``) has not expired, with its worker threads."""
    return [live_worker(name, raw) for name, raw in live_workers_in(client, keys).items()]


@dataclass(frozen=True)
class PipelineState:
    """Everything read at one moment; a source that failed is None, with its error in ``errors``."""

    at: float
    queues: list[QueueDepth] | None
    store: StoreCounts | None
    workers: list[LiveWorker] | None
    circuits: list[CircuitReading] | None
    errors: dict[str, str] = field(default_factory=dict)

    @property
    def workers_active(self) -> int | None:
        """Worker processes whose heartbeat key has not expired."""
        return None if self.workers is None else len(self.workers)

    def as_json(self) -> dict[str, Any]:
        """The document ``calsync status --json`` prints, but for what only it reads (throughput, pause)."""
        return {
            "at": dt.datetime.fromtimestamp(self.at, dt.UTC).isoformat(timespec="seconds"),
            "queues": _each(self.queues, dataclasses.asdict),
            **(dataclasses.asdict(self.store) if self.store else {"dead_letters": None, "targets": None}),
            "workers_active": self.workers_active,
            "workers": _each(self.workers, LiveWorker.model_dump),
            "circuits": _each(self.circuits, dataclasses.asdict),
            "errors": self.errors,
        }


def _each(items: Sequence[T] | None, as_json: Callable[[T], Any]) -> list[Any] | None:
    return None if items is None else [as_json(item) for item in items]


def _age(since: dt.datetime | float | None, now: float) -> float:
    """Seconds from ``since`` to ``now``, never negative (0 without a ``since``), to the millisecond."""
    if isinstance(since, dt.datetime):
        since = since.timestamp()
    return 0.0 if since is None else round(max(0.0, now - since), 3)


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


class StateReader:
    """Reads queues, the database and Redis for one clients (the exporter keeps one for its life)."""

    def __init__(self, clients: Clients) -> None:
        self.clients = clients
        self.settings = clients.settings
        self.keys = clients.keys
        self._traffic = TrafficStore(clients.redis, clients.keys)
        self._broker_redis = clients.redis
        if clients.broker_url != clients.redis_url and broker_kind(clients.broker_url) == "redis":
            self._broker_redis = open_redis(clients.broker_url)
        self._queue_depth = LuaScript(self._broker_redis, __package__, "queue_depth.lua")

    def read(self) -> PipelineState:
        """Read every source, recording failures instead of raising."""
        now = time.time()
        errors: dict[str, str] = {}

        def guarded(source: str, read: Callable[[], T]) -> T | None:
            try:
                return read()
            except Exception as exc:
                errors[source] = f"{type(exc).__name__}: {exc}"
                return None

        queues = guarded("broker", lambda: self.queues(now))
        store = guarded("database", lambda: self.store(now))
        workers = guarded("redis", lambda: live_workers(self.clients.redis, self.keys))
        circuits = guarded("redis", self.circuits)
        return PipelineState(now, queues, store, workers, circuits, errors)

    def queues(self, now: float) -> list[QueueDepth]:
        """The depth of every queue calsync consumes."""
        if broker_kind(self.clients.broker_url) == "rabbitmq":
            url = self.clients.broker_url
            return [QueueDepth(q, _rabbitmq_ready(url, q), None, None, None) for q in consumed_queues(self.settings)]
        return [self._redis_queue(queue, now) for queue in consumed_queues(self.settings)]

    def _redis_queue(self, queue: str, now: float) -> QueueDepth:
        keys = [self.keys.ready_queue(queue), self.keys.queue_messages(queue), self.keys.delayed_messages(queue)]
        ready, unacked, delayed, head = self._queue_depth(keys, [])
        oldest = _age(ready_since(json.loads(head)), now) if head else 0.0
        return QueueDepth(queue, int(ready), int(delayed), max(0, int(unacked) - int(ready)), oldest)

    def store(self, now: float) -> StoreCounts:
        """Dead letters, targets, webhooks and drift sweeps, in one read transaction."""
        with self.clients.db.read() as conn:
            open_counts = dead_letters.open_counts(conn)  # by (job type, reason)
            oldest_failure = dead_letters.oldest_open_failed_at(conn)
            by_status = targets.count_by_status(conn, OUTSTANDING_STATUSES)
            oldest_due = targets.oldest_pending_due(conn)
            disabled = count_disabled(conn)
            deliveries = count_deliveries(conn, OUTSTANDING_DELIVERY_STATUSES)
            drift = self._drift(conn, now)
        by_reason: Counter[str] = Counter()
        by_job_type = Counter(dict.fromkeys(JOB_TYPES, 0))
        for (job_type, reason), n in sorted(open_counts.items()):
            by_reason[reason] += n
            by_job_type[job_type] += n
        total = sum(open_counts.values())
        return StoreCounts(
            DeadLetterCounts(total, dict(by_reason), dict(by_job_type), _age(oldest_failure, now)),
            TargetCounts({status: by_status.get(status, 0) for status in OUTSTANDING_STATUSES}, _age(oldest_due, now)),
            WebhookCounts(disabled, {status: deliveries.get(status, 0) for status in OUTSTANDING_DELIVERY_STATUSES}),
            drift,
        )

    def _drift(self, conn: Connection, now: float) -> DriftCounts:
        """The sweeps' age and the overdue ones; nothing behind while CALSYNC_DRIFT_INTERVAL=0 turns sweeps off
        (the state rows of earlier sweeps would otherwise age for ever)."""
        if not self.settings.drift_enabled:
            return DriftCounts(0.0, 0)
        at = dt.datetime.fromtimestamp(now, dt.UTC)
        overdue = drift_store.overdue_sweeps(conn, now=at, grace=self.settings.drift_interval)
        return DriftCounts(_age(drift_store.oldest_sweep(conn), now), overdue)

    def circuits(self) -> list[CircuitReading]:
        """The breakers of every provider that has them (BREAKER_FAILURES above 0)."""
        breakers = sorted(self.settings.breaker_failures.items())
        return [self._traffic.circuits(name) for name, failures in breakers if failures]

    def close(self) -> None:
        """Release the broker's Redis connection when it is not the clients's."""
        if self._broker_redis is not self.clients.redis:
            self._broker_redis.close()


def _rabbitmq_ready(url: str, queue: str) -> int:
    import pika
    from pika.exceptions import ChannelClosedByBroker

    parameters = pika.URLParameters(url)
    parameters.socket_timeout = parameters.blocked_connection_timeout = _RABBITMQ_TIMEOUT_S
    with pika.BlockingConnection(parameters) as connection:
        try:
            return int(connection.channel().queue_declare(queue=queue, passive=True).method.message_count)
        except ChannelClosedByBroker as exc:
            if exc.reply_code == 404:  # no worker has declared the queue yet
                return 0
            raise

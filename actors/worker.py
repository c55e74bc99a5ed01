"""The composition root of a worker process: every part it runs on, built once, in order, by :func:`build_worker`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import dramatiq

from calsync.actors.declare import declare
from calsync.core.clients import Clients, connect
from calsync.core.config.settings import Settings
from calsync.core.drift.schedule import enqueue_due
from calsync.core.drift.sweep import SweepParts
from calsync.core.messaging.outage import RedisOutage
from calsync.core.model.calendar import Provider, ProviderName
from calsync.core.model.drift import drift_reader
from calsync.core.producer.reconcile import requeue_lost
from calsync.core.redis.limiter import RedisLimiter
from calsync.core.redis.locks import LockManager
from calsync.core.redis.stats import JobStats
from calsync.core.store.accounts import StoredCredentials
from calsync.core.store.key_rotation import require_secret_key
from calsync.core.store.pruning import Retention
from calsync.core.traffic import TrafficGate, TrafficStore, provider_limits
from calsync.core.webhooks import Outbox
from calsync.core.worker.job import JobParts
from calsync.core.worker.maintenance import Maintenance
from calsync.core.worker.metrics import worker_id
from calsync.core.worker.stack import worker_middleware
from calsync.providers.registry import ProviderRegistry


class CloseOnShutdown(dramatiq.Middleware):
    """Calls ``close`` once the worker's threads have stopped, so no adapter call is still running."""

    def __init__(self, close: Callable[[], None]) -> None:
        self._close = close

    def after_worker_shutdown(self, broker: dramatiq.Broker, worker: dramatiq.Worker) -> None:
        """Dramatiq's hook after the worker threads joined: release the adapters."""
        self._close()


@dataclass(frozen=True)
class WorkerProcess:
    """What one worker process runs on (``clients.broker``: the broker the actors are declared on, with the worker's
    middleware); ``close`` releases it (tests, benchmarks; Dramatiq's shutdown closes the adapters itself)."""

    clients: Clients
    locks: LockManager
    stats: JobStats
    providers: ProviderRegistry
    actors: dict[str, dramatiq.Actor[Any, Any]]

    def close(self) -> None:
        """Release the adapters' connections, then the locks' and counters' threads, then the clients."""
        self.providers.close()
        self.locks.close()
        self.stats.close()
        self.clients.close()


def build_worker(settings: Settings, *, providers: Mapping[str, Provider] | None = None) -> WorkerProcess:
    """The worker of this process, top to bottom; ``providers`` replaces some adapters (tests, benchmarks).

    Each part takes the parts it uses; nothing is looked up later. A wrong secret key stops the process
    here, before any job is taken (:func:`require_secret_key`).
    """
    # Database: connections are checked out without a pre-ping (a dead one fails its job, which is retried).
    # The pool keeps one per worker thread, so no job waits for a connection, and two more: the maintenance
    # pass, and the outbox's subscriptions read inside a job's write transaction.
    clients = connect(settings, pool_size=settings.worker_threads + 2, pre_ping=False)  # may start embedded Redis
    db, client, keys, cipher, broker = clients.db, clients.redis, clients.keys, clients.cipher, clients.broker
    try:
        require_secret_key(cipher, db)
    except BaseException:
        clients.close()
        raise

    # Redis: locks naming this process' heartbeat (a dead worker's locks can be taken over), batched counters.
    locks = LockManager(client, ttl_seconds=settings.lock_ttl, owner=lambda: keys.worker_heartbeat(worker_id()))
    stats = JobStats(client, keys, flush_every=1.0)

    # Stores and features: traffic control around provider calls, the webhook outbox the job records into.
    traffic = TrafficGate(TrafficStore(client, keys), provider_limits(settings, lease=settings.job_time_limit + 5))
    outbox = Outbox(db, settings.webhook_queue, ttl=settings.webhook_directory_ttl)

    # Providers: each adapter built on first use; Graph's per-mailbox slots are shared by every worker.
    mailbox_slots = RedisLimiter(
        client,
        keys,
        limit=settings.graph_mailbox_concurrency,
        lease=settings.provider_timeout * 3 + 5,
        wait=settings.graph_slot_wait,
    )
    registry = ProviderRegistry(
        settings, dict(providers or {}), limiter=mailbox_slots, credentials=StoredCredentials(db, cipher)
    )

    # Middleware on the broker (connect built it without any), then the actors on that broker.
    watch = RedisOutage().of(clients.redis_url)
    middleware = worker_middleware(settings, db, client, keys, stats, outbox, watch=watch)
    for each in [*middleware, CloseOnShutdown(registry.close)]:
        broker.add_middleware(each)

    def due_sweeps() -> int:  # the drift sweeps that are due (core/drift/schedule.py)
        return enqueue_due(db, broker, settings.effective_drift_queue, interval=settings.drift_interval,
                           reads_back=lambda name: _reads_back(registry, name))  # fmt: skip

    if settings.maintenance_enabled:  # housekeeping, one pass per interval across workers (docs/RUNBOOK.md)
        broker.add_middleware(
            Maintenance(
                db,
                client,
                keys,
                interval=settings.maintenance_interval,
                retention=Retention.of(settings),
                watch=watch,
                requeue=lambda: requeue_lost(clients).enqueued,  # the CronJob's pass, with no CronJob needed
                sweeps=due_sweeps if settings.drift_enabled else None,
            )
        )
    parts = JobParts(
        db=db,
        cipher=cipher,
        locks=locks,
        keys=keys,
        providers=registry,
        broker=broker,
        queue=settings.queue,
        idempotency_ttl=settings.idempotency_ttl,
        delete_verify_delay=settings.delete_verify_delay,
        trust_handover=settings.lock_handover,
        outbox=outbox,
        traffic=traffic,
    )
    sweep_parts = SweepParts(db, cipher, registry, broker, settings.queue, traffic=traffic, outbox=outbox)
    return WorkerProcess(clients, locks, stats, registry, declare(clients, parts, sweep_parts))


def _reads_back(registry: ProviderRegistry, name: ProviderName) -> bool:
    # Whether the provider's adapter is a DriftReader; one that cannot be built is not swept (its jobs say why).
    try:
        return drift_reader(registry.get(name)) is not None
    except Exception:
        return False

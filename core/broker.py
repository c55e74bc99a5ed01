"""The Dramatiq broker, built from settings: Redis (default, embedded when unset) or RabbitMQ.

Redis is tuned so a SIGKILLed worker's in-flight messages come back quickly: a short
``heartbeat_timeout`` and a high ``maintenance_chance`` (Dramatiq's defaults, 60 s and 0.1 %, make
recovery take ~10 minutes on average; see docs/ARCHITECTURE.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import dramatiq
from dramatiq.brokers.rabbitmq import RabbitmqBroker
from dramatiq.brokers.redis import RedisBroker
from dramatiq.middleware import ShutdownNotifications, TimeLimit

from core.heartbeat import Heartbeat
from core.metrics import WorkerMetrics
from core.middleware.dead_letters import DeadLetterRecorder
from core.middleware.idempotency import IdempotencyGuard
from core.middleware.lifecycle import JobLifecycle, JobObserver
from core.middleware.locking import LockObserver, ResourceLocking
from core.middleware.retries import ScheduledRetries
from core.middleware.stale import StaleVersionSkip
from core.middleware.validation import PayloadValidation

if TYPE_CHECKING:
    from core.runtime import Runtime

_MAINTENANCE_SCALE = 1_000_000  # Dramatiq's unit for maintenance_chance


def worker_middleware(
    runtime: Runtime,
    *,
    first: Sequence[dramatiq.Middleware] = (),
    job_observers: Sequence[JobObserver] = (),
    lock_observer: LockObserver | None = None,
) -> list[dramatiq.Middleware]:
    """The worker's middleware list; ``first`` goes before everything (Prometheus must come first)."""
    settings = runtime.settings
    return [
        *first,
        JobLifecycle(runtime.stats, job_observers),
        TimeLimit(time_limit=int(settings.job_time_limit * 1000)),
        ShutdownNotifications(),
        PayloadValidation(),
        DeadLetterRecorder(runtime),
        # After-hooks run in reverse: the lock is released before Retries enqueues the next attempt, so a
        # short retry delay never finds its own delivery still holding the lock.
        ScheduledRetries(runtime),
        ResourceLocking(runtime.locks, runtime.keys, settings, lock_observer),
        # Under the lock, both read the delivery's state, loaded once in a single statement.
        IdempotencyGuard(runtime),
        StaleVersionSkip(runtime),
    ]


def observed_worker_middleware(runtime: Runtime) -> list[dramatiq.Middleware]:
    """The worker's middleware with metrics and heartbeats wired in (docs/METRICS.md)."""
    # Imported here, not at the top: importing it creates Dramatiq's metrics directory, which
    # producers must not need. Prometheus comes first: it counts skipped messages correctly only
    # when no middleware before it raises SkipMessage (notes dramatiq-2.2-facts §5.3).
    from dramatiq.middleware.prometheus import Prometheus

    metrics = WorkerMetrics(runtime)
    return worker_middleware(
        runtime,
        first=[Prometheus(), metrics, Heartbeat(runtime)],
        job_observers=[metrics.observe_job],
        lock_observer=metrics.observe_lock,
    )


def build_broker(runtime: Runtime, *, worker: bool) -> dramatiq.Broker:
    """A broker for this process: with the full middleware stack for workers, none for producers."""
    settings = runtime.settings
    middleware = observed_worker_middleware(runtime) if worker else []
    broker: dramatiq.Broker
    if urlsplit(runtime.broker_url).scheme in {"amqp", "amqps"}:
        broker = RabbitmqBroker(url=runtime.broker_url, middleware=middleware, confirm_delivery=True)
    else:
        broker = RedisBroker(  # type: ignore[no-untyped-call]
            url=runtime.broker_url,
            namespace=settings.redis_namespace,
            heartbeat_timeout=int(settings.broker_heartbeat_timeout * 1000),
            maintenance_chance=int(settings.broker_maintenance_chance * _MAINTENANCE_SCALE),
            middleware=middleware,
        )
    broker.declare_queue(settings.queue)
    return broker

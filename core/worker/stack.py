"""The worker's middleware stack, in order: what runs around every delivery (docs/ARCHITECTURE.md)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import dramatiq
from dramatiq.middleware import ShutdownNotifications, TimeLimit

from calsync.core.worker.heartbeat import Heartbeat
from calsync.core.worker.metrics import WorkerMetrics
from calsync.core.worker.middleware.dead_letters import DeadLetterRecorder
from calsync.core.worker.middleware.idempotency import IdempotencyGuard
from calsync.core.worker.middleware.lifecycle import JobLifecycle, JobObserver
from calsync.core.worker.middleware.locking import LockObserver, ResourceLocking
from calsync.core.worker.middleware.retries import ScheduledRetries
from calsync.core.worker.middleware.stale import StaleVersionSkip
from calsync.core.worker.middleware.validation import PayloadValidation

if TYPE_CHECKING:
    from calsync.core.runtime import Runtime

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

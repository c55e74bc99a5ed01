"""The worker's middleware stack: only what runs around every delivery, whatever the job.

Before-hooks run top to bottom and after-hooks bottom to top (Dramatiq's rule). The job itself
(parse, lock, state, idempotency, staleness, provider call, result) is one function,
:func:`core.worker.job.run_sync`, which the sync actor calls; none of the middlewares below guards it:

0. in workers, ``first``: Dramatiq's ``Prometheus``, :class:`~core.worker.metrics.WorkerMetrics`,
   :class:`~core.worker.heartbeat.Heartbeat` (docs/METRICS.md), :class:`~core.worker.pause.PauseGate`
   (pauses the consumers while ``calsync pause`` is on; no hook around deliveries),
   :class:`~core.messaging.outage.RedisOutage` (an unreachable Redis: said once, waited out by the
   consumers), :class:`~core.worker.maintenance.Maintenance` (the housekeeping thread);
1. ``JobLifecycle`` — opens the delivery; its ack/nack hooks run last, logging and counting the outcome;
2. ``TimeLimit`` — Dramatiq's, set above the provider timeout so a hung call is interrupted;
3. ``ShutdownNotifications`` — Dramatiq's, lets SIGTERM stop idle threads cleanly;
4. ``DeadLetterRecorder`` — durable DLQ record before every nack (nack hooks only);
5. ``ScheduledRetries`` — after a delivery raised: defer (busy lock), retry on the schedule, or dead-letter.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import dramatiq
from dramatiq.middleware import ShutdownNotifications, TimeLimit

from calsync.core.messaging.outage import RedisOutage
from calsync.core.redis.pause import PauseSwitch
from calsync.core.store.pruning import Retention
from calsync.core.webhooks import Outbox
from calsync.core.worker.heartbeat import Heartbeat, HeartbeatTiming
from calsync.core.worker.maintenance import Maintenance
from calsync.core.worker.metrics import WorkerMetrics
from calsync.core.worker.middleware.dead_letters import DeadLetterRecorder
from calsync.core.worker.middleware.lifecycle import JobLifecycle, JobObserver
from calsync.core.worker.middleware.retries import RetryPolicy, ScheduledRetries
from calsync.core.worker.pause import PauseGate

if TYPE_CHECKING:
    from calsync.core.runtime import Runtime


def worker_middleware(
    runtime: Runtime,
    outbox: Outbox,
    *,
    first: Sequence[dramatiq.Middleware] = (),
    job_observers: Sequence[JobObserver] = (),
) -> list[dramatiq.Middleware]:
    """The worker's middleware list; ``first`` goes before everything (Prometheus must come first)."""
    settings = runtime.settings
    policy = RetryPolicy(
        schedule=settings.retry_schedule,
        jitter=settings.retry_jitter,
        defer_delay=settings.lock_retry_delay,
        max_deferrals=settings.lock_max_waits,
        held_note_every=settings.reconcile_after / 2,
    )
    return [
        *first,
        JobLifecycle(runtime.stats, job_observers),
        TimeLimit(time_limit=int(settings.job_time_limit * 1000)),
        ShutdownNotifications(),
        DeadLetterRecorder(runtime.db, outbox),
        ScheduledRetries(runtime.db, policy),
    ]


def observed_worker_middleware(
    runtime: Runtime, outbox: Outbox, *, requeue: Callable[[], int] | None = None
) -> list[dramatiq.Middleware]:
    """The worker's middleware with metrics and heartbeats wired in (docs/METRICS.md).

    ``requeue`` (the reconciler's re-enqueueing, given by the composition root) runs in every housekeeping pass.
    """
    # Imported here, not at the top: importing it creates Dramatiq's metrics directory, which producers
    # must not need. Prometheus comes first so that its durations and in-progress gauge span the others.
    from dramatiq.middleware.prometheus import Prometheus

    settings = runtime.settings
    metrics = WorkerMetrics()
    timing = HeartbeatTiming(
        interval=settings.heartbeat_interval,
        ttl=settings.heartbeat_ttl,
        directory=settings.effective_heartbeat_dir,
        stuck_grace=settings.stuck_grace,
        job_time_limit=settings.job_time_limit,
    )
    outage = RedisOutage()
    watch = outage.of(runtime.redis_url)
    pause = PauseGate(PauseSwitch(runtime.redis, runtime.keys), watch=watch)
    heartbeat = Heartbeat(runtime.redis, runtime.keys, timing, pause, watch)
    runtime.locks.owned_by(lambda: heartbeat.key)  # a dead worker's locks can be taken over (docs/notes/locks.md)
    first: list[dramatiq.Middleware] = [Prometheus(), metrics, heartbeat, pause, outage]
    if settings.maintenance_enabled:  # housekeeping, one pass per interval across workers (docs/RUNBOOK.md)
        first.append(Maintenance(runtime.db, runtime.redis, runtime.keys, interval=settings.maintenance_interval,
                                 retention=Retention.of(settings), requeue=requeue, watch=watch))  # fmt: skip
    return worker_middleware(runtime, outbox, first=first, job_observers=[metrics.observe_job])

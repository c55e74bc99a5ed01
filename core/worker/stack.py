"""The worker's middleware stack: only what runs around every delivery, whatever the job.

Before-hooks run top to bottom and after-hooks bottom to top (Dramatiq's rule). The job itself
(parse, lock, state, idempotency, staleness, provider call, result) is one function,
:func:`core.worker.job.run_sync`, which the sync actor calls; none of the middlewares below guards it:

0. Dramatiq's ``Prometheus``, :class:`~core.worker.metrics.WorkerMetrics`,
   :class:`~core.worker.heartbeat.Heartbeat` (docs/METRICS.md), :class:`~core.worker.pause.PauseGate`
   (pauses the consumers while ``calsync pause`` is on; no hook around deliveries),
   :class:`~core.messaging.outage.RedisOutage` (an unreachable Redis: said once, waited out by the
   consumers); the composition root adds :class:`~core.worker.maintenance.Maintenance` (the
   housekeeping thread) after the broker exists, since its pass enqueues on that broker;
1. ``JobLifecycle`` — opens the delivery; its ack/nack hooks run last, logging and counting the outcome;
2. ``TimeLimit`` — Dramatiq's, set above the provider timeout so a hung call is interrupted;
3. ``ShutdownNotifications`` — Dramatiq's, lets SIGTERM stop idle threads cleanly;
4. ``DeadLetterRecorder`` — durable DLQ record before every nack (nack hooks only);
5. ``ScheduledRetries`` — after a delivery raised: defer (busy lock), retry on the schedule, or dead-letter.
"""

from __future__ import annotations

import dramatiq
import redis
from dramatiq.middleware import ShutdownNotifications, TimeLimit

from calsync.core.config.settings import Settings
from calsync.core.messaging.outage import RedisWatch
from calsync.core.redis.keys import RedisKeys
from calsync.core.redis.pause import PauseSwitch
from calsync.core.redis.stats import JobStats
from calsync.core.store.database import Database
from calsync.core.webhooks import Outbox
from calsync.core.worker.heartbeat import Heartbeat
from calsync.core.worker.metrics import WorkerMetrics
from calsync.core.worker.middleware.dead_letters import DeadLetterRecorder
from calsync.core.worker.middleware.lifecycle import JobLifecycle
from calsync.core.worker.middleware.retries import ScheduledRetries
from calsync.core.worker.pause import PauseGate


def worker_middleware(
    settings: Settings,
    db: Database,
    client: redis.Redis,
    keys: RedisKeys,
    stats: JobStats,
    outbox: Outbox,
    *,
    watch: RedisWatch,
) -> list[dramatiq.Middleware]:
    """The worker's middleware list, metrics, heartbeats, the pause gate and the Redis outage first
    (docs/METRICS.md); ``watch``: the worker's Redis in its outage middleware."""
    # Imported here, not at the top: importing it creates Dramatiq's metrics directory, which producers
    # must not need. Prometheus comes first so that its durations and in-progress gauge span the others.
    from dramatiq.middleware.prometheus import Prometheus

    pause = PauseGate(PauseSwitch(client, keys), watch=watch)
    return [
        Prometheus(),
        WorkerMetrics(),
        Heartbeat(client, keys, settings, pause, watch),
        pause,
        watch.outage,
        JobLifecycle(stats),
        TimeLimit(time_limit=int(settings.job_time_limit * 1000)),
        ShutdownNotifications(),
        DeadLetterRecorder(db, outbox),
        ScheduledRetries(db, settings),
    ]

"""Dramatiq actors, declared on a given broker with a given runtime (no import-time global broker).

Declaring them from a function keeps one process able to host several brokers (tests run the same
actors on Redis and RabbitMQ) and makes their dependencies explicit. This package is the composition
root: the only place that joins the core to the provider adapters (docs/ARCHITECTURE.md).
"""

from __future__ import annotations

from typing import Any

import dramatiq

from calsync.core.messaging.messages import RECONCILE_JOB
from calsync.core.model.calendar import ProviderLookup
from calsync.core.model.errors import Deferred
from calsync.core.model.payload import SYNC_JOB
from calsync.core.producer.reconcile import reconcile as reconcile_overdue
from calsync.core.runtime import Runtime
from calsync.core.worker.job import JobParts, sync_actor


def declare(
    broker: dramatiq.Broker, runtime: Runtime, providers: ProviderLookup
) -> dict[str, dramatiq.Actor[Any, Any]]:
    """Register every calsync actor on ``broker``; returns them by name."""
    settings = runtime.settings
    parts = JobParts(
        db=runtime.db,
        cipher=runtime.cipher,
        locks=runtime.locks,
        keys=runtime.keys,
        providers=providers,
        broker=broker,
        queue=settings.queue,
        idempotency_ttl=settings.idempotency_ttl,
    )

    def reconcile() -> None:
        """Re-enqueue what the broker lost: pending targets overdue by RECONCILE_AFTER."""
        reconcile_overdue(runtime)

    declare_sync = dramatiq.actor(
        broker=broker,
        queue_name=settings.queue,
        actor_name=SYNC_JOB,
        time_limit=int(settings.job_time_limit * 1000),
        throws=(Deferred,),  # a busy lock defers the job: Dramatiq logs it as expected, not as an error
    )
    declare_reconcile = dramatiq.actor(
        broker=broker,
        queue_name=settings.queue,
        actor_name=RECONCILE_JOB,
        time_limit=int(max(settings.job_time_limit, 300) * 1000),
    )
    return {SYNC_JOB: declare_sync(sync_actor(parts)), RECONCILE_JOB: declare_reconcile(reconcile)}

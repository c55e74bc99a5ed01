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
from calsync.core.model.payload import SYNC_JOB
from calsync.core.producer.reconcile import reconcile as reconcile_overdue
from calsync.core.runtime import Runtime
from calsync.core.worker.job import run_sync


def declare(
    broker: dramatiq.Broker, runtime: Runtime, providers: ProviderLookup
) -> dict[str, dramatiq.Actor[Any, Any]]:
    """Register every calsync actor on ``broker``; returns them by name."""
    settings = runtime.settings

    def sync_calendar_event(payload: dict[str, Any]) -> None:
        """Make one event appear (or disappear) in one account, as its latest version says."""
        run_sync(runtime, providers, payload)

    def reconcile() -> None:
        """Re-enqueue what the broker lost: pending targets overdue by RECONCILE_AFTER."""
        reconcile_overdue(runtime)

    declare_sync = dramatiq.actor(
        broker=broker, queue_name=settings.queue, actor_name=SYNC_JOB, time_limit=int(settings.job_time_limit * 1000)
    )
    declare_reconcile = dramatiq.actor(
        broker=broker,
        queue_name=settings.queue,
        actor_name=RECONCILE_JOB,
        time_limit=int(max(settings.job_time_limit, 300) * 1000),
    )
    return {SYNC_JOB: declare_sync(sync_calendar_event), RECONCILE_JOB: declare_reconcile(reconcile)}

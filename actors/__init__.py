"""Dramatiq actors, declared on a given broker with a given runtime (no import-time global broker).

Declaring them from a function keeps one process able to host several brokers (tests run the same
actors on Redis and RabbitMQ) and makes their dependencies explicit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import dramatiq

from actors.reconcile import reconcile
from actors.sync import sync_calendar_event
from core.messages import RECONCILE_JOB
from core.payload import SYNC_JOB

if TYPE_CHECKING:
    from core.runtime import Runtime


def declare(broker: dramatiq.Broker, runtime: Runtime) -> dict[str, dramatiq.Actor[Any, Any]]:
    """Register every calsync actor on ``broker``; returns them by name."""
    settings = runtime.settings
    time_limit = int(settings.job_time_limit * 1000)

    def sync_job(payload: dict[str, Any]) -> None:
        sync_calendar_event(runtime, payload)

    def reconcile_job() -> None:
        reconcile(runtime)

    declare_on = dramatiq.actor(broker=broker, queue_name=settings.queue, actor_name=SYNC_JOB, time_limit=time_limit)
    declare_reconcile = dramatiq.actor(
        broker=broker,
        queue_name=settings.queue,
        actor_name=RECONCILE_JOB,
        time_limit=int(max(settings.job_time_limit, 300) * 1000),
    )
    return {SYNC_JOB: declare_on(sync_job), RECONCILE_JOB: declare_reconcile(reconcile_job)}

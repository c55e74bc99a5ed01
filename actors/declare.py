"""Dramatiq actors, declared on the broker of the clients they are given (no import-time global broker).

Declaring them from a function keeps one process able to host several brokers (tests run the same
actors on Redis and RabbitMQ) and makes their dependencies explicit. The worker's composition root
(actors/worker.py) calls it last, with the parts it built.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import dramatiq

from calsync.core.clients import Clients
from calsync.core.config.logging import bind_job
from calsync.core.drift.sweep import SweepParts, parse_sweep, run_sweep
from calsync.core.messaging.messages import DELIVER_WEBHOOK_JOB, DISPATCH_WEBHOOK_JOB, RECONCILE_JOB, SWEEP_JOB
from calsync.core.model.errors import CalsyncError
from calsync.core.model.intake import INTAKE_JOB, IntakeMessage
from calsync.core.model.payload import SYNC_JOB
from calsync.core.producer.reconcile import reconcile as reconcile_overdue
from calsync.core.producer.submit import Producer, intake_actor
from calsync.core.webhooks import Deliverer, DeliveryPolicy, Transport
from calsync.core.worker.delivery import current_delivery
from calsync.core.worker.job import JobParts, sync_actor


def declare(clients: Clients, parts: JobParts, sweeps: SweepParts | None = None) -> dict[str, dramatiq.Actor[Any, Any]]:
    """Register every calsync actor on ``clients.broker``; returns them by name (``parts``: the sync job's,
    ``sweeps``: the drift sweep's, None: no sweep actor)."""
    settings, broker = clients.settings, clients.broker

    def reconcile() -> None:
        """Re-enqueue what the broker lost: pending targets overdue by RECONCILE_AFTER."""
        reconcile_overdue(clients)

    intake = intake_actor(Producer(clients), _delivered)
    declared = [
        # Our own errors (a busy lock, a provider outage, a permanent refusal) are expected outcomes:
        # Dramatiq logs them at info without a traceback and calsync's one warning line tells the rest.
        _actor(broker, SYNC_JOB, sync_actor(parts), settings.queue, settings.job_time_limit),
        _actor(broker, RECONCILE_JOB, reconcile, settings.queue, max(settings.job_time_limit, 300), throws=()),
        # A bad change or the database down: logged with its reason, no traceback.
        _actor(broker, INTAKE_JOB, intake, settings.intake_queue, settings.job_time_limit),
        *_webhook_actors(clients),
    ]
    if sweeps is not None:  # a long full listing may take minutes: the reconciler's limit
        declared.append(_actor(broker, SWEEP_JOB, _sweep(sweeps), settings.effective_drift_queue,
                               max(settings.job_time_limit, 300)))  # fmt: skip
    return {actor.actor_name: actor for actor in declared}


def _actor(
    broker: dramatiq.Broker,
    name: str,
    fn: Callable[..., None],
    queue: str,
    time_limit: float,
    throws: tuple[type[Exception], ...] = (CalsyncError,),
) -> dramatiq.Actor[Any, Any]:
    """``fn`` as actor ``name`` on ``queue`` (``time_limit`` in seconds); ``throws``: the expected errors."""
    limit_ms = int(time_limit * 1000)
    return dramatiq.actor(broker=broker, queue_name=queue, actor_name=name, time_limit=limit_ms, throws=throws)(fn)


def _webhook_actors(clients: Clients) -> list[dramatiq.Actor[Any, Any]]:
    # Their own queue: a slow or dead receiver never delays a calendar sync.
    settings, broker = clients.settings, clients.broker
    queue = settings.webhook_queue
    policy = DeliveryPolicy(
        schedule=settings.webhook_retry_schedule,
        jitter=settings.retry_jitter,
        disable_after=settings.webhook_disable_after,
        disable_min_failures=settings.webhook_disable_min_failures,
    )
    deliverer = Deliverer(clients.db, clients.cipher, Transport.from_settings(settings), broker, queue, policy)
    limit = max(settings.job_time_limit, 2 * settings.webhook_timeout)

    def dispatch_webhook(*notification_ids: str) -> None:
        """Create notifications' deliveries, one per subscribed endpoint, and enqueue them."""
        for notification_id in notification_ids:
            deliverer.dispatch(notification_id)

    def deliver_webhook(notification_id: str, endpoint_id: str) -> None:
        """One signed attempt of one (notification, endpoint) delivery; retries and the DLQ are its own, and the
        job's outcome is the attempt's (a dead-lettered delivery is logged and counted as dead-lettered)."""
        attempted = deliverer.deliver(notification_id, endpoint_id)
        delivery = current_delivery.get()
        if delivery is not None:
            delivery.outcome, delivery.dead_letter_reason = attempted.job_outcome, attempted.dead_letter_reason
            delivery.result.update(attempted.fields)

    return [
        _actor(broker, DISPATCH_WEBHOOK_JOB, dispatch_webhook, queue, limit),
        _actor(broker, DELIVER_WEBHOOK_JOB, deliver_webhook, queue, limit),
    ]


def _sweep(parts: SweepParts) -> Callable[..., None]:
    def sweep_account(arg: Any) -> None:
        """Read one account's calendar back, compare it with what calsync wrote there, apply the tenant's policy."""
        account_id, claim = parse_sweep(arg)
        delivery = current_delivery.get()
        result = run_sweep(parts, account_id, claim=claim, sent=delivery.provider_requests if delivery else None)
        if delivery is not None:  # on the delivery's one log line
            delivery.provider = result.provider
            delivery.result.update(result.fields())

    return sweep_account


def _delivered(message: IntakeMessage) -> str | None:
    # Every log line of the delivery carries the ids the message had; its message id keys a request without an id.
    delivery = current_delivery.get()
    if delivery is None:
        return None
    ids = {"tenant_id": message.tenant_id, "request_id": message.request_id, "trace_id": message.trace_id}
    bind_job(delivery.log_fields() | {k: v for k, v in ids.items() if v is not None})
    return delivery.message_id

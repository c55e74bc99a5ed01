"""A spy on ``broker.enqueue``: what was sent, with which delay, without changing what happens;
and a job's deliveries through the retry middleware, one after another, each the message the previous one sent."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import dramatiq
import pytest
from dramatiq.broker import MessageProxy
from dramatiq.brokers.stub import StubBroker

from calsync.core.config.settings import Settings
from calsync.core.messaging.messages import sync_message
from calsync.core.model.payload import JobPayload, parse_payload
from calsync.core.store.database import Database
from calsync.core.worker.delivery import Delivery, current_delivery
from calsync.core.worker.middleware.retries import ScheduledRetries


@dataclass(frozen=True)
class Sent:
    """One call of ``broker.enqueue``."""

    message: dramatiq.Message[Any]
    delay: int | None  # milliseconds, as passed

    @property
    def payload(self) -> JobPayload:
        """The sync job payload the message carries."""
        return parse_payload(self.message.args)


class EnqueueSpy:
    """Records every message sent by ``broker.enqueue``, then lets the real broker enqueue it."""

    def __init__(self, broker: dramatiq.Broker, monkeypatch: pytest.MonkeyPatch) -> None:
        self.sent: list[Sent] = []
        real = broker.enqueue

        def spy(message: dramatiq.Message[Any], *, delay: int | None = None) -> dramatiq.Message[Any]:
            self.sent.append(Sent(message, delay))
            return real(message, delay=delay)

        monkeypatch.setattr(broker, "enqueue", spy)

    def delayed(self) -> list[Sent]:
        """Calls asking for a later delivery (the worker moving a due message back to its queue passes none)."""
        return [s for s in self.sent if s.delay is not None]

    def retries(self) -> dict[tuple[str, int], Sent]:
        """The retry of each (job id, attempt): the first delayed send carrying that attempt (later ones are
        lock waits, which keep the attempt)."""
        found: dict[tuple[str, int], Sent] = {}
        for sent in self.delayed():
            payload = sent.payload
            if payload.attempt > 1:
                found.setdefault((payload.job_id, payload.attempt), sent)
        return found


def redelivered(
    db: Database,
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
    payload: JobPayload,
    errors: Sequence[BaseException],
) -> tuple[list[Delivery], dramatiq.Message[Any]]:
    """The job delivered once per error on ``settings.queue``, each delivery raising it: what the retry middleware
    (on those settings) made of each, and the message the last one enqueued (a delivery is the message the previous
    one re-enqueued: its options carry over)."""
    retries, stub = ScheduledRetries(db, settings), StubBroker(middleware=[])
    stub.declare_queue(settings.queue)
    spy = EnqueueSpy(stub, monkeypatch)
    message = sync_message(settings.queue, payload)
    delivered = []
    try:
        for error in errors:
            proxy = MessageProxy(message)
            delivery = Delivery(proxy.message_id, proxy.actor_name, proxy.queue_name, payload=payload)
            current_delivery.set(delivery)
            retries.after_process_message(stub, proxy, exception=error)
            delivered.append(delivery)
            message = spy.sent[-1].message
    finally:
        stub.close()
    return delivered, message

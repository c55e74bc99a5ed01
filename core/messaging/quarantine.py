"""The door of every consumer: a delivery either becomes a message a worker thread may run, or is quarantined.

A quarantined delivery is handed to the broker's :class:`QuarantineSink` (the middleware that writes
calsync's durable DLQ) and only then removed from the broker, so it ends in exactly one place. If the
sink cannot store it (the database is down), the consumer gives the delivery back to the queue and tries
again later: nothing is dropped, no thread dies.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, Protocol, runtime_checkable

import dramatiq

from calsync.core.messaging.envelope import EnvelopeCheck, Refused
from calsync.core.model.errors import MalformedMessage
from calsync.core.model.payload import raw_ids
from calsync.core.model.vocabulary import DeadLetterCause, Refusal

log = logging.getLogger(__name__)

RAW_BODY_LIMIT: Final = 64 * 1024  # bytes of a quarantined body kept in the DLQ record
Settle = Callable[[], object]  # what a consumer does to a delivery on its broker: ack, reject or requeue it


@dataclass(frozen=True)
class Arrival:
    """Where and how a delivery arrived: the ``origin`` of its quarantine record."""

    broker: str  # "redis" | "rabbitmq"
    queue: str
    broker_message_id: str | None  # Redis: the id in the list and the .msgs hash; RabbitMQ: the delivery tag
    how: str  # e.g. "LPOP calsync:calendar", "basic_deliver calendar"
    unique_id: bool  # whether broker_message_id names this message for good (a redelivery repeats it)
    details: dict[str, Any] = field(default_factory=dict)

    def origin(self) -> dict[str, Any]:
        """JSON-ready origin of the record."""
        return {"broker": self.broker, "queue": self.queue, "broker_message_id": self.broker_message_id,
                "arrived": self.how, **self.details}  # fmt: skip


@dataclass(frozen=True)
class Quarantined:
    """A delivery refused at the door: its bytes (size-capped), why, and where it came from."""

    refusal: Refusal
    detail: str
    raw_body: bytes
    raw_size: int
    arrival: Arrival
    document: Any  # the decoded JSON when it decoded, for best-effort ids

    @property
    def truncated(self) -> bool:
        """Whether the stored body is shorter than what arrived."""
        return len(self.raw_body) < self.raw_size

    def log_fields(self) -> dict[str, Any]:
        """The fields of its one warning line: the DLQ reason, the actor, and whatever ids its payload carried."""
        doc = self.document if isinstance(self.document, dict) else {}
        args = doc.get("args")
        reason = DeadLetterCause.QUARANTINED.reason(MalformedMessage(self.detail, refusal=self.refusal.value))
        actor = doc.get("actor_name") if isinstance(doc.get("actor_name"), str) else None
        fields = {"reason": reason, "detail": self.detail, "job_type": actor,
                  **(raw_ids(args) if isinstance(args, list) else {}), **self.arrival.origin()}  # fmt: skip
        return {name: value for name, value in fields.items() if value is not None}


@runtime_checkable
class QuarantineSink(Protocol):
    """Stores a quarantined delivery durably; raises if it could not (the delivery is then kept)."""

    def quarantine(self, item: Quarantined) -> None:
        """Store ``item`` or raise."""


class Door(EnvelopeCheck):
    """Admits deliveries of one broker: envelope check, then quarantine of whatever fails it."""

    def admit(self, body: bytes | None, arrival: Arrival) -> dramatiq.Message[Any] | Quarantined:
        """The message to run, or the quarantine record of a delivery that must not run."""
        try:
            verdict = self.read(body, arrival.queue, arrival.broker_message_id if arrival.broker == "redis" else None)
        except Exception as exc:  # a check that itself fails must not take the consumer down
            verdict = Refused(Refusal.NOT_ENVELOPE, f"the envelope check failed: {type(exc).__name__}")
        if not isinstance(verdict, Refused):
            return verdict
        raw = body or b""
        return Quarantined(verdict.refusal, verdict.detail, raw[:RAW_BODY_LIMIT], len(raw), arrival, verdict.document)

    def quarantine(self, item: Quarantined, *, ack: Settle, reject: Settle, keep: Settle, pause: float) -> None:
        """Store ``item`` in the broker's :class:`QuarantineSink`, then ``ack`` it; with no sink, ``reject`` it (the
        broker dead-letters it); when the store fails, ``keep`` it queued and wait ``pause`` s before fetching on."""
        fields = item.log_fields()
        sink = next((m for m in self.broker.middleware if isinstance(m, QuarantineSink)), None)
        if sink is None:
            log.error("message refused and no quarantine is configured; rejecting it", extra={"fields": fields})
            reject()
            return
        try:
            sink.quarantine(item)
        except Exception:
            log.warning("could not quarantine a refused message; it stays queued", exc_info=True,
                        extra={"fields": fields})  # fmt: skip
            keep()
            time.sleep(pause)
        else:
            log.warning("message quarantined", extra={"fields": fields})
            ack()

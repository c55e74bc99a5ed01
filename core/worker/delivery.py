"""The delivery: one delivery of a message to a worker thread, what it is about and how it ended.

Dramatiq runs ``before_process_message``, the actor, ``after_process_message`` and the ack/nack hooks
of a message on the same worker thread, so a context variable holds the delivery; a message id would
not do, because duplicate deliveries of one message can run at the same time on two threads.

Four parts write it, each its own fields: ``JobLifecycle`` opens it, the job (``core.worker.job``)
tells what it is about and how it ended, the traffic gate (``core.traffic``) counts the requests its
provider call sent, ``ScheduledRetries`` how a failure was handled.
"""

from __future__ import annotations

import contextvars
import time
from dataclasses import dataclass, field
from typing import Any

from calsync.core.config.logging import bind_job
from calsync.core.model.payload import JobPayload
from calsync.core.model.provider_io import RequestsSent
from calsync.core.model.vocabulary import DeadLetterCause, Outcome
from calsync.core.worker.failures import rejection_cause

# The delivery being processed on this thread, if any: set when it opens, cleared (None) when it ends.
current_delivery: contextvars.ContextVar[Delivery | None] = contextvars.ContextVar("calsync_delivery", default=None)


@dataclass
class Delivery:
    """One delivery of a message: what it is about, and how it ended."""

    message_id: str
    actor: str
    queue: str
    repair: bool = False  # a repair sync: runs even when its version is already synced
    started: float = field(default_factory=time.monotonic)
    payload: JobPayload | None = None
    provider: str = "unknown"
    outcome: Outcome | None = None
    error: BaseException | None = None
    dead_letter_cause: DeadLetterCause | None = None  # set when the retry policy dead-letters the delivery
    dead_letter_reason: str | None = None  # a dead letter the job recorded itself (a webhook delivery's DLQ reason)
    retry_in: float | None = None
    quiet: bool = False  # a deferral whose reason was told already: its line at DEBUG (core.worker.middleware.retries)
    # Requests handed to the provider (core/model/provider_io.py, counted inside the traffic gate): none means a
    # failure was calsync's own, not the provider's.
    provider_requests: RequestsSent = field(default_factory=RequestsSent)
    result: dict[str, Any] = field(default_factory=dict)  # what the job did, for the delivery's one log line

    def begin(self, payload: JobPayload) -> None:
        """The job's payload is known: every log line from now on carries its fields."""
        self.payload = payload
        bind_job(self.log_fields())

    def dead_lettered_because(self) -> str:
        """Why it was dead-lettered (the log line, ``calsync_dead_letters_total{reason}``): the reason the job
        recorded, else its cause's."""
        if self.dead_letter_reason is not None:
            return self.dead_letter_reason
        return (self.dead_letter_cause or rejection_cause(self.error)).reason(self.error)

    def log_fields(self) -> dict[str, Any]:
        """The fields every log line about this delivery carries: the message, and its payload's ids once known."""
        fields: dict[str, Any] = {"message_id": self.message_id, "job_type": self.actor}
        if self.payload is not None:
            fields.update(self.payload.model_dump(exclude={"job_type", "scheduled_at"}))
        return fields


def delivery_of(message_id: str) -> Delivery | None:
    """The current delivery if it is this message's (hooks of another message must not touch it)."""
    delivery = current_delivery.get()
    return delivery if delivery is not None and delivery.message_id == message_id else None

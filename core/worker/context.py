"""Per-delivery state shared by the middlewares and the actor of one job, on one worker thread.

Dramatiq runs ``before_process_message``, the actor, ``after_process_message`` /
``after_skip_message`` and the ack/nack hooks of a message on the same worker thread, so a context
variable holds the delivery's state; a message id would not do, because duplicate deliveries of one
message can run at the same time on two threads.
"""

from __future__ import annotations

import contextvars
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import dramatiq
from dramatiq.middleware import MiddlewareError, SkipMessage

from calsync.core.model.payload import SYNC_JOB, JobPayload
from calsync.core.model.vocabulary import DeadLetterCause, Outcome
from calsync.core.worker.snapshot import Snapshot, load_snapshot

if TYPE_CHECKING:
    from calsync.core.redis.locks import HeldLock
    from calsync.core.runtime import Runtime

_current: contextvars.ContextVar[JobContext | None] = contextvars.ContextVar("calsync_delivery", default=None)


@dataclass
class JobContext:
    """What the middlewares learned about the delivery being processed."""

    message_id: str
    actor: str
    queue: str
    started: float = field(default_factory=time.monotonic)
    payload: JobPayload | None = None
    outcome: Outcome | None = None
    error: BaseException | None = None
    dead_letter_cause: DeadLetterCause | None = None  # set when the retry policy dead-letters the delivery
    lock: HeldLock | None = None
    snapshot: Snapshot | None = None
    provider: str = "unknown"
    retry_in: float | None = None

    def log_fields(self) -> dict[str, Any]:
        """The fields every log line about this job carries."""
        fields: dict[str, Any] = {"message_id": self.message_id, "job_type": self.actor}
        if self.payload is not None:
            p = self.payload
            fields.update(
                job_id=p.job_id,
                tenant_id=p.tenant_id,
                entity_id=p.entity_id,
                account_id=p.account_id,
                idempotency_key=p.idempotency_key,
                trace_id=p.trace_id,
                attempt=p.attempt,
                operation=p.operation,
                target_version=p.target_version,
            )
        return fields


def current_job() -> JobContext | None:
    """The delivery being processed on this thread, if any."""
    return _current.get()


def start_job(ctx: JobContext | None) -> None:
    """Make ``ctx`` the current delivery of this thread (None clears it)."""
    _current.set(ctx)


class MiddlewareFailure(MiddlewareError):
    """An unexpected exception inside one of our before-hooks, carried to Retries as the job's failure.

    Dramatiq swallows (and only logs) non-MiddlewareError exceptions raised in before-hooks and then
    runs the actor anyway, which would skip our lock or idempotency check; wrapping prevents that.
    """

    def __init__(self, cause: BaseException) -> None:
        super().__init__(f"{type(cause).__name__}: {cause}")
        self.cause = cause


def unwrap(exc: BaseException) -> BaseException:
    """The real failure behind a MiddlewareFailure."""
    return exc.cause if isinstance(exc, MiddlewareFailure) else exc


class JobMiddleware(dramatiq.Middleware):
    """Base of calsync's sync-job middlewares: acts only on sync jobs, never lets a bug bypass a guard."""

    def before_process_message(self, broker: dramatiq.Broker, message: dramatiq.MessageProxy) -> None:
        ctx = current_job()
        if ctx is None or message.actor_name != SYNC_JOB:
            return
        try:
            self.before_job(broker, message, ctx)
        except MiddlewareError:
            raise
        except Exception as exc:
            raise MiddlewareFailure(exc) from exc

    def before_job(self, broker: dramatiq.Broker, message: dramatiq.MessageProxy, ctx: JobContext) -> None:
        """Check or prepare the job before the actor runs; raise SkipMessage to end the delivery early."""


def skip(ctx: JobContext, outcome: Outcome) -> SkipMessage:
    """Record why the delivery ends here and return the SkipMessage to raise."""
    ctx.outcome = outcome
    return SkipMessage(outcome)


def job_snapshot(runtime: Runtime, ctx: JobContext) -> Snapshot:
    """The state of the delivery being processed: read on first need (under the lock), then shared."""
    if ctx.snapshot is None:
        assert ctx.payload is not None
        ctx.snapshot = load_snapshot(runtime, ctx.payload)
        if ctx.snapshot.account is not None:
            ctx.provider = ctx.snapshot.account.provider
    return ctx.snapshot

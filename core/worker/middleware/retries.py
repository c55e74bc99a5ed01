"""Retries on the fixed schedule (``RETRY_SCHEDULE`` ± ``RETRY_JITTER``), replacing Dramatiq's Retries.

- a PermanentError is dead-lettered at once; anything else (unknown exceptions included) is temporary;
- ``max_retries`` = the schedule's length; a provider's retry-after hint is a floor for the delay;
- the retried message carries the payload with ``attempt + 1`` and the new ``scheduled_at``, plus an
  ``errors`` option with one entry per failed attempt (the DLQ record's error history);
- if re-enqueueing the retry fails, the message is dead-lettered instead: Dramatiq would otherwise ack
  it and lose it (dramatiq PR #545).
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import TYPE_CHECKING

import dramatiq
from dramatiq.middleware import Retries

from calsync.core.messaging.messages import redelivery
from calsync.core.model.backoff import retry_delay
from calsync.core.model.errors import TemporaryError, error_class_of, is_permanent
from calsync.core.model.vocabulary import DeadLetterCause, Outcome
from calsync.core.store import targets
from calsync.core.store.targets import TargetKey
from calsync.core.worker.context import JobContext, current_job, unwrap
from calsync.core.worker.failures import HISTORY_LIMIT, error_entry, error_message, rejection_cause

if TYPE_CHECKING:
    from calsync.core.runtime import Runtime

log = logging.getLogger(__name__)

class ScheduledRetries(Retries):
    """Decides retry or dead letter for every failed delivery."""

    def __init__(self, runtime: Runtime) -> None:
        super().__init__(max_retries=runtime.settings.max_retries)
        self.runtime = runtime

    def after_process_message(
        self,
        broker: dramatiq.Broker,
        message: dramatiq.MessageProxy,
        *,
        result: object = None,
        exception: BaseException | None = None,
    ) -> None:
        if exception is None:
            return
        ctx = current_job()
        error = unwrap(exception)
        retries = int(message.options.get("retries", 0))
        attempt = ctx.payload.attempt if ctx and ctx.payload else retries + 1
        history = [*message.options.get("errors", []), error_entry(attempt, error)][-HISTORY_LIMIT:]
        message.options["errors"] = history
        message.options["retries"] = retries + 1
        if ctx is not None:
            ctx.error = error

        if is_permanent(error):
            self._dead_letter(message, ctx, rejection_cause(error))
            return
        if retries >= self.runtime.settings.max_retries:
            self._dead_letter(message, ctx, DeadLetterCause.EXHAUSTED)
            return

        hint = error.retry_after if isinstance(error, TemporaryError) else None
        settings = self.runtime.settings
        delay = retry_delay(settings.retry_schedule, retries, jitter=settings.retry_jitter, retry_after=hint)
        args = [ctx.payload.next_attempt(delay).to_message_arg()] if ctx and ctx.payload else None
        try:
            broker.enqueue(redelivery(message, args=args), delay=int(delay * 1000))
        except Exception:
            log.exception("could not enqueue the retry; dead-lettering instead of losing the message")
            self._dead_letter(message, ctx, DeadLetterCause.ENQUEUE_FAILED)
            return
        if ctx is not None:
            ctx.outcome = Outcome.RETRY_SCHEDULED
            ctx.retry_in = delay
            if ctx.payload is not None:
                self._note_retry(ctx, error, delay)

    def _dead_letter(self, message: dramatiq.MessageProxy, ctx: JobContext | None, cause: DeadLetterCause) -> None:
        message.fail()
        if ctx is not None:
            ctx.outcome = Outcome.DEAD_LETTERED
            ctx.dead_letter_cause = cause

    def _note_retry(self, ctx: JobContext, error: BaseException, delay: float) -> None:
        # Best effort: the target's due time tells the reconciler the message is not lost, only waiting.
        assert ctx.payload is not None
        p = ctx.payload
        try:
            with self.runtime.db.write() as conn:
                targets.record_retry(
                    conn,
                    TargetKey(p.tenant_id, p.entity_id, p.account_id),
                    version=p.target_version,
                    error_class=error_class_of(error),
                    message=error_message(error),
                    due_at=dt.datetime.now(dt.UTC) + dt.timedelta(seconds=delay),
                )
        except Exception:
            log.warning("could not record the retry on the target", exc_info=True)

"""Opens each delivery's context and, when the delivery ends (ack or nack), logs and counts its outcome.

Its line is the one warning a dead letter or a scheduled retry writes (job ids bound by the context,
outcome, reason, error class and the redacted message): expected failures carry no traceback (the actors
declare them in ``throws``); only an unexpected exception gets Dramatiq's error line with its traceback.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

import dramatiq

from calsync.core.config.logging import bind_job
from calsync.core.model.errors import InvalidPayload, error_class_of
from calsync.core.model.redaction import redact
from calsync.core.model.vocabulary import Outcome
from calsync.core.redis.stats import JobStats
from calsync.core.worker.context import REPAIR_OPTION, JobContext, delivery_of, start_job

log = logging.getLogger("calsync.jobs")

JobObserver = Callable[[JobContext, Outcome, float], None]


class JobLifecycle(dramatiq.Middleware):
    """First in the stack: its after-hooks run last, when every other middleware has had its say."""

    def __init__(self, stats: JobStats, observers: Sequence[JobObserver] = ()) -> None:
        self.stats = stats
        self.observers = list(observers)

    def before_process_message(self, broker: dramatiq.Broker, message: dramatiq.MessageProxy) -> None:
        ctx = JobContext(message.message_id, message.actor_name, message.queue_name,
                         repair=bool(message.options.get(REPAIR_OPTION)))  # fmt: skip
        start_job(ctx)
        bind_job(ctx.log_fields())

    def after_ack(self, broker: dramatiq.Broker, message: dramatiq.MessageProxy) -> None:
        self._finish(message, acked=True)

    def after_nack(self, broker: dramatiq.Broker, message: dramatiq.MessageProxy) -> None:
        self._finish(message, acked=False)

    def after_worker_shutdown(self, broker: dramatiq.Broker, worker: dramatiq.Worker) -> None:
        try:
            self.stats.flush()  # the last second's counts, before the process goes
        except Exception:
            log.warning("could not write the last job outcome counts", exc_info=True)

    def _finish(self, message: dramatiq.MessageProxy, *, acked: bool) -> None:
        ctx = delivery_of(message.message_id)
        if ctx is None:
            if not acked:  # e.g. a message for an actor this worker does not know
                log.error("message dead-lettered before processing", extra={"fields": {"actor": message.actor_name}})
                unprocessed = JobContext(message.message_id, message.actor_name, message.queue_name)
                unprocessed.error = getattr(message, "_exception", None)
                for observer in self.observers:
                    observer(unprocessed, Outcome.DEAD_LETTERED, 0.0)
            return
        outcome = (ctx.outcome or Outcome.SUCCESS) if acked else Outcome.DEAD_LETTERED
        duration = time.monotonic() - ctx.started
        fields: dict[str, object] = {"outcome": outcome, "duration_seconds": round(duration, 4), **ctx.result}
        if outcome is Outcome.DEAD_LETTERED:
            fields["reason"] = ctx.dead_lettered_because()
        if ctx.error is not None:
            fields.update(error_class=error_class_of(ctx.error), error=redact(str(ctx.error))[:500])
        if ctx.payload is None and isinstance(ctx.error, InvalidPayload):
            fields.update(ctx.error.ids)  # what the rejected payload carried, so the producer can be found
        if ctx.retry_in is not None:
            fields["retry_in_seconds"] = round(ctx.retry_in, 3)
        level = logging.WARNING if outcome in (Outcome.DEAD_LETTERED, Outcome.RETRY_SCHEDULED) else logging.INFO
        if ctx.quiet:  # a job deferred again for a reason already told (docs/RUNBOOK.md, "Why is my job waiting?")
            level = logging.DEBUG
        log.log(level, "job %s", outcome, extra={"fields": fields})
        try:
            self.stats.record(outcome)
        except Exception:
            log.warning("could not count job outcome", exc_info=True)
        for observer in self.observers:
            observer(ctx, outcome, duration)
        bind_job(None)
        start_job(None)

"""Opens each delivery and, when it ends (ack or nack), logs and counts its outcome.

Its line is the one warning a dead letter or a scheduled retry writes (job ids bound by the delivery,
outcome, reason, error class and the redacted message): expected failures carry no traceback (the actors
declare them in ``throws``); only an unexpected exception gets Dramatiq's error line with its traceback.
"""

from __future__ import annotations

import logging
import time

import dramatiq

from calsync.core.config.logging import bind_job
from calsync.core.messaging.messages import REPAIR_OPTION
from calsync.core.model.errors import InvalidPayload, error_class_of
from calsync.core.model.redaction import redact
from calsync.core.model.vocabulary import Outcome
from calsync.core.redis.stats import JobStats
from calsync.core.worker.delivery import Delivery, current_delivery, delivery_of
from calsync.core.worker.metrics import count_job

log = logging.getLogger("calsync.jobs")


class JobLifecycle(dramatiq.Middleware):
    """First in the stack: its after-hooks run last, when every other middleware has had its say."""

    def __init__(self, stats: JobStats) -> None:
        self.stats = stats

    def before_process_message(self, broker: dramatiq.Broker, message: dramatiq.MessageProxy) -> None:
        repair = bool(message.options.get(REPAIR_OPTION))
        delivery = Delivery(message.message_id, message.actor_name, message.queue_name, repair=repair)
        current_delivery.set(delivery)
        bind_job(delivery.log_fields())

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
        delivery = delivery_of(message.message_id)
        if delivery is None:  # never opened: the door lets through only messages of declared actors
            return
        outcome = (delivery.outcome or Outcome.SUCCESS) if acked else Outcome.DEAD_LETTERED
        duration = time.monotonic() - delivery.started
        fields: dict[str, object] = {"outcome": outcome, "duration_seconds": round(duration, 4), **delivery.result}
        if outcome is Outcome.DEAD_LETTERED:
            fields["reason"] = delivery.dead_lettered_because()
        if delivery.error is not None:
            fields.update(error_class=error_class_of(delivery.error), error=redact(str(delivery.error))[:500])
        if delivery.payload is None and isinstance(delivery.error, InvalidPayload):
            fields.update(delivery.error.ids)  # what the rejected payload carried, so the producer can be found
        if delivery.retry_in is not None:
            fields["retry_in_seconds"] = round(delivery.retry_in, 3)
        level = logging.WARNING if outcome in (Outcome.DEAD_LETTERED, Outcome.RETRY_SCHEDULED) else logging.INFO
        if delivery.quiet:  # deferred again for a reason already told (docs/RUNBOOK.md, "Why is my job waiting?")
            level = logging.DEBUG
        log.log(level, "job %s", outcome, extra={"fields": fields})
        try:
            self.stats.record(outcome)
        except Exception:
            log.warning("could not count job outcome", exc_info=True)
        count_job(delivery, outcome, duration)
        bind_job(None)
        current_delivery.set(None)

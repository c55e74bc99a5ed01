"""Retries on the fixed schedule (``RETRY_SCHEDULE`` ± ``RETRY_JITTER``), replacing Dramatiq's Retries.

- a :class:`~core.model.errors.Deferred` job is not a failure: it is re-enqueued with the same attempt.
  A busy target lock waits ``LOCK_RETRY_DELAY`` ± jitter and counts in ``lock_waits``; after
  ``LOCK_MAX_WAITS`` waits it becomes a failure (LockBusy) and goes through the schedule below. A job
  traffic control holds (:class:`~core.model.errors.Held`: a limit, a back-off, an open breaker) waits
  the delay it carries ± jitter, as often as it takes, counted apart (``traffic_waits``) and never
  toward ``LOCK_MAX_WAITS``: it is never dead-lettered for it. Every ``RECONCILE_AFTER`` / 2 seconds a held
  job pushes its target's due time, so the reconciler does not take a long-held job for a lost one and enqueue
  it again;
- why it waits is told once, not at every deferral: a job's first wait for the lock, its first hold, a hold for
  another reason than the last one told, a hold that carries a provider's error (an excused failure) and then
  one hold per ``RECONCILE_AFTER`` / 2 are noted on the target (``wait_reason``, ``due_at``, the provider's last
  error) and logged at INFO; the deferrals between log at DEBUG and write nothing (docs/RUNBOOK.md, "Why is my
  job waiting?");
- a PermanentError is dead-lettered at once; anything else (unknown exceptions included) is temporary;
  the same error on two attempts in a row that sent no request to the provider is calsync's own bug,
  dead-lettered at once (cause ``worker_bug``; core/worker/failures.py);
- ``max_retries`` = the schedule's length; a provider's retry-after hint is a floor for the delay;
- the retried message carries the payload with ``attempt + 1`` and the new ``scheduled_at``, plus an
  ``errors`` option with one entry per failed attempt (the DLQ record's error history);
- if re-enqueueing the retry fails, the message is dead-lettered instead (cause ``enqueue_failed``):
  Dramatiq would otherwise ack it and lose it (dramatiq PR #545).
"""

from __future__ import annotations

import datetime as dt
import logging
import time

import dramatiq
from dramatiq.middleware import Retries

from calsync.core.config.settings import Settings
from calsync.core.messaging.messages import redelivery
from calsync.core.model.backoff import jittered, retry_delay
from calsync.core.model.errors import Deferred, Held, TemporaryError, error_class_of, is_permanent
from calsync.core.model.vocabulary import DeadLetterCause, Outcome
from calsync.core.store import targets
from calsync.core.store.database import Database
from calsync.core.store.targets import TargetKey
from calsync.core.worker.delivery import Delivery, delivery_of
from calsync.core.worker.failures import (
    ERRORS_OPTION,
    HISTORY_LIMIT,
    RETRIES_OPTION,
    count_option,
    error_entry,
    error_message,
    history_option,
    is_worker_bug,
    provider_error_of,
    rejection_cause,
    wait_reason_of,
)

log = logging.getLogger(__name__)

DEFERRALS_OPTION = "lock_waits"  # the message option counting a job's lock waits (its name predates Deferred)
HELD_OPTION = "traffic_waits"  # the message option counting how often traffic control held a job (logs, DLQ)
HELD_NOTED_OPTION = "traffic_noted_at"  # unix time a held job last pushed its target's due time
HELD_REASON_OPTION = "traffic_noted_reason"  # the wait reason then noted (another one is told again)


class ScheduledRetries(Retries):
    """Decides defer, retry or dead letter for every delivery that raised, on the settings' schedule, jitter and
    lock waits."""

    def __init__(self, db: Database, settings: Settings) -> None:
        super().__init__(max_retries=len(settings.retry_schedule))
        self.db = db
        self.settings = settings

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
        delivery = delivery_of(message.message_id) or Delivery(
            message.message_id, message.actor_name, message.queue_name
        )
        error = exception
        if isinstance(error, Deferred) and not isinstance(error, Held):
            waits = count_option(message.options, DEFERRALS_OPTION)
            if waits >= self.settings.lock_max_waits:
                error = error.give_up(waits)
        if isinstance(error, Deferred):
            try:
                self._defer(broker, message, delivery, error)
                return
            except Exception as exc:
                log.exception("could not re-enqueue the deferred job; it is retried as a failure instead")
                error = exc
        self._failed(broker, message, delivery, error)

    def _defer(
        self, broker: dramatiq.Broker, message: dramatiq.MessageProxy, delivery: Delivery, error: Deferred
    ) -> None:
        # A busy lock: LOCK_RETRY_DELAY, counted; a hold of traffic control: the wait it answered, noted again
        # every RECONCILE_AFTER / 2 seconds, for another reason, or with a provider's error.
        now, reason = time.time(), wait_reason_of(error)
        if isinstance(error, Held):
            noted = message.options.get(HELD_NOTED_OPTION)
            told = (
                not isinstance(noted, int | float)
                or now - noted >= self.settings.reconcile_after / 2
                or message.options.get(HELD_REASON_OPTION) != reason
                or provider_error_of(error) is not None
            )
            options: dict[str, int | str] = {HELD_OPTION: count_option(message.options, HELD_OPTION) + 1}
            if told:
                options.update({HELD_NOTED_OPTION: int(now), HELD_REASON_OPTION: reason})
            wait, outcome = error.retry_after or self.settings.lock_retry_delay, Outcome.DEFERRED
        else:
            waits = count_option(message.options, DEFERRALS_OPTION)
            told, options = waits == 0, {DEFERRALS_OPTION: waits + 1}
            wait, outcome = self.settings.lock_retry_delay, Outcome.LOCK_BUSY
        delay = jittered(wait, self.settings.retry_jitter)
        args = None
        if delivery.payload is not None:
            later = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=delay)
            args = [delivery.payload.model_copy(update={"scheduled_at": later}).to_message_arg()]
        broker.enqueue(redelivery(message, args=args, options=options), delay=int(delay * 1000))
        delivery.outcome, delivery.retry_in, delivery.quiet = outcome, delay, not told
        delivery.error = provider_error_of(error)  # the provider's failure an excused hold carries, for the line
        delivery.result["wait_reason"] = reason
        if told:
            self._note_retry(delivery, error, delay)

    def _failed(
        self, broker: dramatiq.Broker, message: dramatiq.MessageProxy, delivery: Delivery, error: BaseException
    ) -> None:
        retries = count_option(message.options, RETRIES_OPTION)
        attempt = delivery.payload.attempt if delivery.payload else retries + 1
        before = history_option(message.options)
        entry = error_entry(attempt, error, provider_io=delivery.provider_requests.count > 0)
        message.options[ERRORS_OPTION] = [*before, entry][-HISTORY_LIMIT:]
        message.options[RETRIES_OPTION] = retries + 1
        delivery.error = error
        if is_permanent(error):
            self._dead_letter(message, delivery, rejection_cause(error))
        elif is_worker_bug(before, entry, error):  # the same error again, the provider never reached: ours
            self._dead_letter(message, delivery, DeadLetterCause.WORKER_BUG)
        elif retries >= len(self.settings.retry_schedule):
            self._dead_letter(message, delivery, DeadLetterCause.EXHAUSTED)
        else:
            hint = error.retry_after if isinstance(error, TemporaryError) else None
            delay = retry_delay(
                self.settings.retry_schedule, retries, jitter=self.settings.retry_jitter, retry_after=hint
            )
            args = [delivery.payload.next_attempt(delay).to_message_arg()] if delivery.payload else None
            try:
                broker.enqueue(redelivery(message, args=args), delay=int(delay * 1000))
            except Exception:
                if self._leave_to_reconciler(delivery):
                    log.warning("could not enqueue the retry; the reconciler's next pass enqueues it", exc_info=True)
                    delivery.outcome = Outcome.RETRY_SCHEDULED
                    return
                log.exception("could not enqueue the retry nor mark it owed; dead-lettering instead of losing it")
                self._dead_letter(message, delivery, DeadLetterCause.ENQUEUE_FAILED)
                return
            delivery.outcome, delivery.retry_in = Outcome.RETRY_SCHEDULED, delay
            self._note_retry(delivery, error, delay)

    def _leave_to_reconciler(self, delivery: Delivery) -> bool:
        # A retry the broker refused (no Redis master answering, mostly during a failover) is owed, not failed: the
        # target, still pending, loses its due time and the reconciler's next pass enqueues it, as for an intake
        # whose enqueue failed after its commit. Only when that cannot be written either is it dead-lettered.
        p = delivery.payload
        if p is None:
            return False
        try:
            with self.db.write() as conn:
                targets.mark_unqueued(conn, TargetKey(p.tenant_id, p.entity_id, p.account_id))
        except Exception:
            log.warning("could not mark the target's retry as owed", exc_info=True)
            return False
        return True

    def _dead_letter(self, message: dramatiq.MessageProxy, delivery: Delivery, cause: DeadLetterCause) -> None:
        message.fail()
        delivery.outcome, delivery.dead_letter_cause = Outcome.DEAD_LETTERED, cause

    def _note_retry(self, delivery: Delivery, error: BaseException, delay: float) -> None:
        # Best effort: the target's due time tells the reconciler the message is not lost, only waiting; its reason
        # and the provider's last error tell people why (`calsync events show`, GET /v1/events/{id}).
        p = delivery.payload
        if p is None:
            return
        cause = provider_error_of(error)
        try:
            with self.db.write() as conn:
                targets.record_retry(
                    conn,
                    TargetKey(p.tenant_id, p.entity_id, p.account_id),
                    version=p.target_version,
                    wait_reason=wait_reason_of(error),
                    error_class=error_class_of(cause) if cause is not None else None,
                    message=error_message(cause) if cause is not None else None,
                    due_at=dt.datetime.now(dt.UTC) + dt.timedelta(seconds=delay),
                )
        except Exception:
            log.warning("could not record the retry on the target", exc_info=True)

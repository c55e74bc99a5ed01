"""The durable DLQ: every message Dramatiq rejects is recorded in ``dead_letters`` before the nack.

``before_nack`` is the one place every rejected message passes (permanent errors, exhausted retries,
invalid payloads, unknown actors). In the same transaction the target is marked ``failed`` (unless a
newer version already took over) and, for AuthRevoked, the account is marked ``needs_reauth``.
If the database cannot be reached, the hook raises a broker connection error, which makes Dramatiq
retry the whole nack every few seconds instead of dropping our record. A write that fails for a data
reason (a value out of range, too long, a constraint) would fail the same way forever: the record is
then stored degraded (cut to fit the table, target left alone) instead.

It is also the broker's quarantine (:class:`~core.messaging.quarantine.QuarantineSink`): deliveries the
consumer refused are recorded here with kind ``quarantined``.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

import dramatiq
import sqlalchemy.exc
from dramatiq.errors import BrokerConnectionError
from dramatiq.middleware import MiddlewareError

from calsync.core.messaging.quarantine import Quarantined
from calsync.core.model.errors import AuthRevoked, InvalidPayload, StoreUnavailable, error_class_of
from calsync.core.model.payload import JobPayload, parse_payload, raw_ids
from calsync.core.model.vocabulary import DeadLetterCause
from calsync.core.store import accounts, dead_letters, targets
from calsync.core.store.database import Database
from calsync.core.store.dead_letters import DeadLetterRecord, fitted
from calsync.core.store.targets import TargetKey
from calsync.core.webhooks import Outbox
from calsync.core.worker.context import JobContext, delivery_of
from calsync.core.worker.failures import (
    RETRIES_OPTION,
    UnknownActor,
    count_option,
    error_entry,
    error_message,
    history_option,
    rejection_cause,
)
from calsync.core.worker.metrics import DEAD_LETTERS
from calsync.core.worker.middleware.quarantine import quarantine_record

log = logging.getLogger(__name__)

# The database is down (retry later), as opposed to refusing this record's data (store it degraded).
_UNAVAILABLE = (StoreUnavailable, sqlalchemy.exc.TimeoutError, sqlalchemy.exc.InterfaceError, OSError)


class DeadLetterStoreUnavailable(BrokerConnectionError, MiddlewareError):
    """The DLQ record could not be written; Dramatiq retries the nack (and this hook) until it can."""


def _payload_of(message: dramatiq.MessageProxy, ctx: JobContext | None) -> JobPayload | None:
    if ctx is not None and ctx.payload is not None:
        return ctx.payload
    try:
        return parse_payload(message.args)
    except InvalidPayload:
        return None


def _raw_payload(message: dramatiq.MessageProxy) -> Any:
    args = list(message.args)
    if len(args) == 1 and not message.kwargs:
        return args[0]
    return {"args": args, "kwargs": dict(message.kwargs)}


class DeadLetterRecorder(dramatiq.Middleware):
    """Writes the dead-letter record, marks the target failed and, when needed, the account."""

    def __init__(self, db: Database, outbox: Outbox | None = None) -> None:
        self.db = db
        self.outbox = outbox  # webhook notifications recorded with the dead letter

    def before_nack(self, broker: dramatiq.Broker, message: dramatiq.MessageProxy) -> None:
        ctx = delivery_of(message.message_id)
        payload = _payload_of(message, ctx)
        error: BaseException = (
            ctx.error
            if ctx is not None and ctx.error is not None
            else getattr(message, "_exception", None) or UnknownActor(f"no actor named {message.actor_name!r}")
        )
        cause = (ctx.dead_letter_cause if ctx is not None else None) or rejection_cause(error)
        record = dead_letter_record(message, payload, error, cause)
        try:
            notified = self._store_or_degrade(record, payload, error)
        except _UNAVAILABLE as exc:
            log.exception("could not record the dead letter; the nack will be retried")
            raise DeadLetterStoreUnavailable(str(exc)) from exc  # type: ignore[no-untyped-call]
        log.debug("job dead-lettered", extra={"fields": {"reason": record.reason, "error_class": record.error_class}})
        if notified and self.outbox is not None:
            self.outbox.send(broker, notified)

    def after_worker_shutdown(self, broker: dramatiq.Broker, worker: dramatiq.Worker) -> None:
        if self.outbox is not None:
            self.outbox.flush()  # webhook dispatches still lingering in this process (else: the reconciler)

    def quarantine(self, item: Quarantined) -> None:
        """Record a delivery the consumer refused (raises while the database is down: it stays queued)."""
        record = quarantine_record(item)
        self._store_or_degrade(record, None, None)
        try:
            DEAD_LETTERS.labels(record.job_type, record.reason).inc()  # never a job, so no calsync_jobs_total
        except Exception:
            log.warning("could not count the quarantined message", exc_info=True)

    def _store_or_degrade(
        self, record: DeadLetterRecord, payload: JobPayload | None, error: BaseException | None
    ) -> list[str]:
        try:
            return self._store(record, payload, error)
        except _UNAVAILABLE:
            raise
        except Exception as exc:
            why = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            log.warning("dead letter refused by the database; storing it degraded", extra={"fields": {"why": why}})
        try:
            with self.db.write() as conn:
                dead_letters.insert(self.db, conn, fitted(record, why))
        except _UNAVAILABLE:
            raise
        except Exception:
            # fitted() cuts every column to the table, so this is a bug; retrying would loop forever.
            log.exception("could not store even the degraded dead letter", extra={"fields": {"job_id": record.job_id}})
        return []

    def _store(self, record: DeadLetterRecord, payload: JobPayload | None, error: BaseException | None) -> list[str]:
        db = self.db
        with db.write() as conn:
            dead_letters.insert(db, conn, record)
            if payload is None:
                return []
            key = TargetKey(payload.tenant_id, payload.entity_id, payload.account_id)
            targets.record_failed(conn, key, version=payload.target_version, error_class=record.error_class,
                                  message=record.last_error)  # fmt: skip
            reauth = False
            if isinstance(error, AuthRevoked):
                account = accounts.get_summary(conn, payload.account_id)
                reauth = account is not None and account.status == "active"
                if reauth:
                    accounts.update_account(conn, payload.account_id, status="needs_reauth")
            return self.outbox.on_dead_lettered(conn, record, payload, needs_reauth=reauth) if self.outbox else []


def dead_letter_record(
    message: dramatiq.MessageProxy, payload: JobPayload | None, error: BaseException, cause: DeadLetterCause
) -> DeadLetterRecord:
    """The DLQ record of a rejected message: its payload, attempts, cause and error history."""
    retries = count_option(message.options, RETRIES_OPTION)
    attempt = payload.attempt if payload else max(1, retries)
    history = history_option(message.options)
    ids = _ids_of(message, payload, error)
    if not history or history[-1].get("attempt") != attempt:
        history.append(error_entry(attempt, error))
    detail = cause.detail(attempt)
    now = dt.datetime.now(dt.UTC)
    return DeadLetterRecord(
        job_id=ids.get("job_id") or f"msg_{message.message_id}",
        job_type=payload.job_type if payload else message.actor_name,
        message_id=message.message_id,
        queue=message.queue_name,
        tenant_id=ids.get("tenant_id"),
        entity_id=ids.get("entity_id"),
        account_id=ids.get("account_id"),
        idempotency_key=ids.get("idempotency_key"),
        trace_id=ids.get("trace_id"),
        payload=_raw_payload(message),
        attempts=attempt,
        reason=cause.reason(error),
        error_class=error_class_of(error),
        last_error=error_message(error) + (f" ({detail})" if detail else ""),
        error_history=history,
        first_failed_at=_first_failure(history, now),
        failed_at=now,
    )


def _ids_of(message: dramatiq.MessageProxy, payload: JobPayload | None, error: BaseException) -> dict[str, str]:
    # A valid payload's ids; else whatever ids the rejected one carried (best effort, bounded).
    if payload is not None:
        return {"job_id": payload.job_id, "tenant_id": payload.tenant_id, "entity_id": payload.entity_id,
                "account_id": payload.account_id, "idempotency_key": payload.idempotency_key,
                "trace_id": payload.trace_id}  # fmt: skip
    return error.ids if isinstance(error, InvalidPayload) and error.ids else raw_ids(list(message.args))


def _first_failure(history: list[dict[str, Any]], default: dt.datetime) -> dt.datetime:
    try:
        return dt.datetime.fromisoformat(history[0]["at"])
    except (IndexError, KeyError, TypeError, ValueError):
        return default

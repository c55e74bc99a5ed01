"""The durable DLQ: every message Dramatiq rejects is recorded in ``dead_letters`` before the nack.

``before_nack`` is the one place every rejected message passes (permanent errors, exhausted retries,
invalid payloads, unknown actors). In the same transaction the target is marked ``failed`` (unless a
newer version already took over) and, for AuthRevoked, the account is marked ``needs_reauth``.
If the database cannot be reached, the hook raises a broker connection error, which makes Dramatiq
retry the whole nack every few seconds instead of dropping our record.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

import dramatiq
from dramatiq.errors import BrokerConnectionError
from dramatiq.middleware import MiddlewareError

from calsync.core.model.errors import AuthRevoked, InvalidPayload, error_class_of
from calsync.core.model.payload import JobPayload, parse_payload
from calsync.core.model.vocabulary import DeadLetterCause
from calsync.core.store import accounts, dead_letters, targets
from calsync.core.store.database import Database
from calsync.core.store.dead_letters import DeadLetterRecord
from calsync.core.store.targets import TargetKey
from calsync.core.worker.context import JobContext, delivery_of
from calsync.core.worker.failures import (
    ERRORS_OPTION,
    RETRIES_OPTION,
    UnknownActor,
    error_entry,
    error_message,
    rejection_cause,
)

log = logging.getLogger(__name__)


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

    def __init__(self, db: Database) -> None:
        self.db = db

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
            self._store(record, payload, error)
        except Exception as exc:
            log.exception("could not record the dead letter; the nack will be retried")
            raise DeadLetterStoreUnavailable(str(exc)) from exc  # type: ignore[no-untyped-call]
        log.warning("job dead-lettered", extra={"fields": {"reason": record.reason, "error_class": record.error_class}})

    def _store(self, record: DeadLetterRecord, payload: JobPayload | None, error: BaseException) -> None:
        db = self.db
        with db.write() as conn:
            dead_letters.insert(db, conn, record)
            if payload is None:
                return
            key = TargetKey(payload.tenant_id, payload.entity_id, payload.account_id)
            targets.record_failed(conn, key, version=payload.target_version, error_class=record.error_class,
                                  message=record.last_error)  # fmt: skip
            if isinstance(error, AuthRevoked):
                account = accounts.get_summary(conn, payload.account_id)
                if account is not None and account.status == "active":
                    accounts.update_account(conn, payload.account_id, status="needs_reauth")


def dead_letter_record(
    message: dramatiq.MessageProxy, payload: JobPayload | None, error: BaseException, cause: DeadLetterCause
) -> DeadLetterRecord:
    """The DLQ record of a rejected message: its payload, attempts, cause and error history."""
    retries = int(message.options.get(RETRIES_OPTION, 0))
    attempt = payload.attempt if payload else max(1, retries)
    history = list(message.options.get(ERRORS_OPTION, []))
    if not history or history[-1].get("attempt") != attempt:
        history.append(error_entry(attempt, error))
    detail = cause.detail(attempt)
    now = dt.datetime.now(dt.UTC)
    return DeadLetterRecord(
        job_id=payload.job_id if payload else _raw_job_id(message),
        job_type=payload.job_type if payload else message.actor_name,
        message_id=message.message_id,
        queue=message.queue_name,
        tenant_id=payload.tenant_id if payload else _raw_str(message, "tenant_id"),
        entity_id=payload.entity_id if payload else None,
        account_id=payload.account_id if payload else None,
        idempotency_key=payload.idempotency_key if payload else None,
        trace_id=payload.trace_id if payload else _raw_str(message, "trace_id"),
        payload=_raw_payload(message),
        attempts=attempt,
        reason=cause.reason(error),
        error_class=error_class_of(error),
        last_error=error_message(error) + (f" ({detail})" if detail else ""),
        error_history=history,
        first_failed_at=_first_failure(history, now),
        failed_at=now,
    )


def _raw_job_id(message: dramatiq.MessageProxy) -> str:
    args = list(message.args)
    if args and isinstance(args[0], dict) and isinstance(args[0].get("job_id"), str) and args[0]["job_id"]:
        return str(args[0]["job_id"])[:128]
    return f"msg_{message.message_id}"


def _raw_str(message: dramatiq.MessageProxy, name: str) -> str | None:
    # An id a message that is not a sync job carried (an intake message's tenant_id and trace_id).
    args = list(message.args)
    value = args[0].get(name) if args and isinstance(args[0], dict) else None
    return value[:128] if isinstance(value, str) and value else None


def _first_failure(history: list[dict[str, Any]], default: dt.datetime) -> dt.datetime:
    try:
        return dt.datetime.fromisoformat(history[0]["at"])
    except (IndexError, KeyError, TypeError, ValueError):
        return default

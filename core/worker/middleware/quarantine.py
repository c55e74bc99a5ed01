"""The DLQ record of a quarantined delivery: bytes that never became a runnable message.

The record keeps the raw body (size-capped by the door), its full size, where and how it arrived
(``origin``), why it was refused, and whatever ids its payload carried, so operators can find the
producer. A Redis delivery is named by its queued id, so recording a redelivered one twice is a no-op.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from typing import Any

from calsync.core.messaging.envelope import MESSAGE_ID_LIMIT
from calsync.core.messaging.quarantine import Quarantined
from calsync.core.model.errors import MalformedMessage, error_class_of
from calsync.core.model.ids import new_id
from calsync.core.model.payload import raw_ids
from calsync.core.model.vocabulary import DeadLetterCause
from calsync.core.store.dead_letters import DeadLetterRecord
from calsync.core.worker.failures import error_entry, error_message

_JOB_TYPE_LIMIT = 64


def _text(doc: dict[str, Any], name: str, limit: int) -> str | None:
    value = doc.get(name)
    return value if isinstance(value, str) and 0 < len(value) <= limit else None


def _record_id(item: Quarantined) -> str:
    arrival = item.arrival
    if not arrival.unique_id or arrival.broker_message_id is None:
        return new_id("quarantine")
    named = f"{arrival.broker}\0{arrival.queue}\0{arrival.broker_message_id}".encode("utf-8", "replace")
    return f"quarantine_{hashlib.sha256(named).hexdigest()[:40]}"


def quarantine_record(item: Quarantined) -> DeadLetterRecord:
    """The ``dead_letters`` row (kind ``quarantined``) of a refused delivery."""
    doc = item.document if isinstance(item.document, dict) else {}
    args = doc.get("args")
    ids = raw_ids(args) if isinstance(args, list) else {}
    error = MalformedMessage(item.detail, refusal=item.refusal.value)
    now = dt.datetime.now(dt.UTC)
    return DeadLetterRecord(
        job_id=_record_id(item),
        job_type=_text(doc, "actor_name", _JOB_TYPE_LIMIT) or "unknown",
        message_id=_text(doc, "message_id", MESSAGE_ID_LIMIT),
        queue=item.arrival.queue[:128],
        tenant_id=ids.get("tenant_id"),
        entity_id=ids.get("entity_id"),
        account_id=ids.get("account_id"),
        idempotency_key=ids.get("idempotency_key"),
        trace_id=ids.get("trace_id"),
        payload=None,  # the raw body is the message; a replay decodes it
        attempts=0,
        reason=DeadLetterCause.QUARANTINED.reason(error),
        error_class=error_class_of(error),
        last_error=error_message(error),
        error_history=[error_entry(0, error)],
        first_failed_at=now,
        failed_at=now,
        kind="quarantined",
        raw_body=item.raw_body,
        raw_size=item.raw_size,
        origin={**item.arrival.origin(), "truncated": item.truncated},
    )

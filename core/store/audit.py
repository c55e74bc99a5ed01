"""The audit log: every operator action (who, when, what, on how many), written in the action's own transaction.

An action and its audit row commit together, so the log never claims an action that did not happen and never
misses one that did. ``actor`` is the operator's name (a trusted proxy's user included); ``subject`` says what was
acted on (a dead letter's id, "filter: tenant=t1 status=open", an account); ``count`` how many records it changed.
Pages are newest first by id (the primary key), optionally one actor's (``ix_audit_log_actor``).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, insert, select

from calsync.core.store.database import given_equal
from calsync.core.store.schema import audit_log as a


@dataclass(frozen=True)
class AuditEntry:
    """One recorded action."""

    id: int
    at: dt.datetime
    actor: str
    action: str
    subject: str
    count: int
    detail: dict[str, Any] | None


def record(
    conn: Connection, *, actor: str, action: str, subject: str, count: int, detail: dict[str, Any] | None = None
) -> None:
    """Write one action to the log, in the caller's transaction."""
    values = {"at": dt.datetime.now(dt.UTC), "actor": actor, "action": action, "subject": subject[:1024]}
    conn.execute(insert(a).values(**values, count=count, detail=detail))


def page(conn: Connection, *, actor: str | None = None, before: int | None = None, limit: int = 50) -> list[AuditEntry]:
    """Up to ``limit`` entries newest first, older than id ``before`` when given, of one ``actor`` when given."""
    query = select(a).where(*given_equal((a.c.actor, actor)))
    if before is not None:
        query = query.where(a.c.id < before)
    return [AuditEntry(**row) for row in conn.execute(query.order_by(a.c.id.desc()).limit(limit)).mappings()]

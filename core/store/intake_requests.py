"""Repository of ``intake_requests``: a retried request (same tenant and key) gets the first receipt.

The HTTP ``Idempotency-Key`` header and the intake actor's request id share this table. A row is
written in the same transaction as the intent it accepted, so a request either saved its change and
its row, or neither; the receipt is filled in once the jobs were enqueued.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, delete, insert, select, update

from calsync.core.store.schema import intake_requests as r


@dataclass(frozen=True)
class IntakeRequest:
    """The first request under a key: what it asked for (hash) and what it was answered."""

    body_hash: str
    entity_id: str
    version: int
    receipt: dict[str, Any] | None


def find(conn: Connection, tenant_id: str, request_key: str) -> IntakeRequest | None:
    """The live (unexpired) first request under this key, if any."""
    row = conn.execute(
        select(r.c.body_hash, r.c.entity_id, r.c.version, r.c.receipt).where(
            r.c.tenant_id == tenant_id, r.c.request_key == request_key, r.c.expires_at > dt.datetime.now(dt.UTC)
        )
    ).first()
    return None if row is None else IntakeRequest(row.body_hash, row.entity_id, row.version, row.receipt)


def record(
    conn: Connection, tenant_id: str, request_key: str, *, body_hash: str, entity_id: str, version: int, ttl: int
) -> None:
    """Record the first request under this key, in the caller's transaction (an expired row is replaced).

    A concurrent first request under the same key makes this raise the database's IntegrityError.
    """
    now = dt.datetime.now(dt.UTC)
    conn.execute(
        delete(r).where(r.c.tenant_id == tenant_id, r.c.request_key == request_key, r.c.expires_at <= now)
    )
    conn.execute(
        insert(r).values(
            tenant_id=tenant_id,
            request_key=request_key,
            body_hash=body_hash,
            entity_id=entity_id,
            version=version,
            receipt=None,
            created_at=now,
            expires_at=now + dt.timedelta(seconds=ttl),
        )
    )


def set_receipt(conn: Connection, tenant_id: str, request_key: str, receipt: dict[str, Any]) -> None:
    """Store the receipt the first request was answered with."""
    conn.execute(
        update(r).where(r.c.tenant_id == tenant_id, r.c.request_key == request_key).values(receipt=receipt)
    )


def purge_expired(conn: Connection) -> int:
    """Delete the expired rows; returns how many went."""
    result = conn.execute(delete(r).where(r.c.expires_at <= dt.datetime.now(dt.UTC)))
    return result.rowcount or 0

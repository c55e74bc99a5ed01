"""Repository of ``intake_requests``: a retried request (same tenant and key) gets the first receipt.

The HTTP ``Idempotency-Key`` header and the intake actor's request id share this table. A row is
written in the same transaction as the intent it accepted, so a request either saved its change and
its row, or neither; the receipt is filled in once the jobs were enqueued.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, and_, bindparam, delete, insert, select, update

from calsync.core.store.schema import intake_requests as r


@dataclass(frozen=True)
class IntakeRequest:
    """The first request under a key: what it asked for (hash) and what it was answered."""

    body_hash: str
    entity_id: str
    version: int
    receipt: dict[str, Any] | None


# Constant statements (SQLAlchemy caches their compiled form): one intake request runs three of them.
_BY_KEY = and_(r.c.tenant_id == bindparam("k_tenant"), r.c.request_key == bindparam("k_request"))
_FIND = select(r.c.body_hash, r.c.entity_id, r.c.version, r.c.receipt).where(
    _BY_KEY, r.c.expires_at > bindparam("k_now", type_=r.c.expires_at.type)
)
_DELETE_EXPIRED = delete(r).where(_BY_KEY, r.c.expires_at <= bindparam("k_now", type_=r.c.expires_at.type))
_INSERT = insert(r)
_SET_RECEIPT = update(r).where(_BY_KEY)  # SET receipt from the parameter of that name


def _key(tenant_id: str, request_key: str) -> dict[str, str]:
    return {"k_tenant": tenant_id, "k_request": request_key}


def find(conn: Connection, tenant_id: str, request_key: str) -> IntakeRequest | None:
    """The live (unexpired) first request under this key, if any."""
    row = conn.execute(_FIND, {**_key(tenant_id, request_key), "k_now": dt.datetime.now(dt.UTC)}).first()
    return None if row is None else IntakeRequest(row.body_hash, row.entity_id, row.version, row.receipt)


def record(
    conn: Connection, tenant_id: str, request_key: str, *, body_hash: str, entity_id: str, version: int, ttl: int
) -> None:
    """Record the first request under this key, in the caller's transaction (an expired row is replaced).

    A concurrent first request under the same key makes this raise the database's IntegrityError.
    """
    now = dt.datetime.now(dt.UTC)
    conn.execute(_DELETE_EXPIRED, {**_key(tenant_id, request_key), "k_now": now})
    conn.execute(_INSERT, {"tenant_id": tenant_id, "request_key": request_key, "body_hash": body_hash,
                           "entity_id": entity_id, "version": version, "receipt": None, "created_at": now,
                           "expires_at": now + dt.timedelta(seconds=ttl)})  # fmt: skip


def set_receipt(conn: Connection, tenant_id: str, request_key: str, receipt: dict[str, Any]) -> None:
    """Store the receipt the first request was answered with."""
    conn.execute(_SET_RECEIPT, {**_key(tenant_id, request_key), "receipt": receipt})


def purge_expired(conn: Connection) -> int:
    """Delete the expired rows; returns how many went."""
    result = conn.execute(delete(r).where(r.c.expires_at <= dt.datetime.now(dt.UTC)))
    return result.rowcount or 0

"""Repository of ``intake_requests``: a retried request (same tenant and key) gets the first receipt.

The HTTP ``Idempotency-Key`` header and the intake actor's request id share this table. A row is
written in the same transaction as the intent it accepted, so a request either saved its change and
its row, or neither; the receipt is filled in once the jobs were enqueued, once: the first receipt
stored is the key's for good (core/producer/receipts.py).
"""

from __future__ import annotations

import datetime as dt
import functools
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, and_, bindparam, null, select, update

from calsync.core.store.database import take_over_expired
from calsync.core.store.schema import intake_requests as r


@dataclass(frozen=True)
class IntakeRequest:
    """The first request under a key: what it asked for (hash), what it was answered, and since when."""

    body_hash: str
    entity_id: str
    version: int
    receipt: dict[str, Any] | None
    created_at: dt.datetime


# Constant statements (SQLAlchemy caches their compiled form).
_BY_KEY = and_(r.c.tenant_id == bindparam("k_tenant"), r.c.request_key == bindparam("k_request"))
_FIND = select(r.c.body_hash, r.c.entity_id, r.c.version, r.c.receipt, r.c.created_at).where(
    _BY_KEY, r.c.expires_at > bindparam("k_now", type_=r.c.expires_at.type)
)
_STORE_RECEIPT = update(r).where(_BY_KEY, r.c.receipt.is_(None))  # SET receipt from the parameter of that name


def _key(tenant_id: str, request_key: str) -> dict[str, str]:
    return {"k_tenant": tenant_id, "k_request": request_key}


def find(conn: Connection, tenant_id: str, request_key: str) -> IntakeRequest | None:
    """The live (unexpired) first request under this key, if any."""
    row = conn.execute(_FIND, {**_key(tenant_id, request_key), "k_now": dt.datetime.now(dt.UTC)}).mappings().first()
    return None if row is None else IntakeRequest(**row)


@functools.cache
def _claim(dialect: str) -> Any:
    # The receipt SQL NULL, not JSON null: store_receipt looks for it. A row when claimed: SQLAlchemy keeps no rowcount
    # of an INSERT.
    return take_over_expired(r, dialect, receipt=null()).returning(r.c.version)


def claim(
    conn: Connection, tenant_id: str, request_key: str, *, body_hash: str, entity_id: str, version: int, ttl: int
) -> bool:
    """Record the first request under this key in the caller's transaction; False when the key is taken.

    One statement: an expired row is replaced, a live one left alone. On PostgreSQL a concurrent first
    request's uncommitted row makes it wait for that request's commit (then False) or rollback (then True).
    """
    now = dt.datetime.now(dt.UTC)
    values = {"tenant_id": tenant_id, "request_key": request_key, "body_hash": body_hash, "entity_id": entity_id,
              "version": version, "created_at": now, "expires_at": now + dt.timedelta(seconds=ttl)}  # fmt: skip
    return conn.execute(_claim(conn.dialect.name), values).first() is not None


def store_receipt(conn: Connection, tenant_id: str, request_key: str, receipt: dict[str, Any]) -> dict[str, Any] | None:
    """Store the receipt of the key's request unless one is stored already; returns the one stored (None: no row)."""
    if conn.execute(_STORE_RECEIPT, {**_key(tenant_id, request_key), "receipt": receipt}).rowcount:
        return receipt
    stored = find(conn, tenant_id, request_key)
    return None if stored is None else stored.receipt

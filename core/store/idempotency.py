"""Repository of ``idempotency_records``: which logical effects already happened, kept for a TTL."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from sqlalchemy import Connection, delete, select

from core.store.database import Database
from core.store.schema import idempotency_records as r


def succeeded(conn: Connection, key: str) -> bool:
    """Whether the effect behind ``key`` is recorded as done and the record has not expired."""
    now = dt.datetime.now(dt.UTC)
    query = select(r.c.key).where(r.c.key == key, r.c.outcome == "success", r.c.expires_at > now)
    return conn.execute(query).first() is not None


def record_success(
    db: Database, conn: Connection, key: str, *, job_id: str, result: Mapping[str, Any], ttl_seconds: int
) -> None:
    """Record the effect as done, inside the caller's transaction (the same one as the sync result).

    A record left by an earlier expired run is replaced; a concurrent duplicate is ignored.
    """
    now = dt.datetime.now(dt.UTC)
    conn.execute(delete(r).where(r.c.key == key, r.c.expires_at <= now))
    conn.execute(
        db.insert_ignoring_conflicts(r).values(
            key=key,
            job_id=job_id,
            outcome="success",
            result=dict(result),
            created_at=now,
            expires_at=now + dt.timedelta(seconds=ttl_seconds),
        )
    )


def purge_expired(conn: Connection, *, limit: int = 10_000) -> int:
    """Delete expired records (run by the reconciler) and return how many went."""
    now = dt.datetime.now(dt.UTC)
    expired = select(r.c.key).where(r.c.expires_at <= now).limit(limit).scalar_subquery()
    return int(conn.execute(delete(r).where(r.c.key.in_(expired))).rowcount)

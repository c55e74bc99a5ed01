"""Repository of ``idempotency_records``: which logical effects already happened, kept for a TTL."""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Mapping
from typing import Any

from sqlalchemy import ColumnElement, Connection, Insert, and_, bindparam, select

from calsync.core.store.database import take_over_expired
from calsync.core.store.schema import idempotency_records as r


def succeeded_condition(key: str, now: str) -> ColumnElement[bool]:
    """Rows proving an effect happened: a success whose TTL has not run out (parameters named ``key``, ``now``)."""
    expires_at = r.c.expires_at
    return and_(r.c.key == bindparam(key), r.c.outcome == "success", expires_at > bindparam(now, type_=expires_at.type))


_SUCCEEDED = select(r.c.key).where(succeeded_condition("key", "now"))


def succeeded(conn: Connection, key: str) -> bool:
    """Whether the effect behind ``key`` is recorded as done and the record has not expired."""
    return conn.execute(_SUCCEEDED, {"key": key, "now": dt.datetime.now(dt.UTC)}).first() is not None


def record_success(conn: Connection, key: str, *, job_id: str, result: Mapping[str, Any], ttl_seconds: int) -> None:
    """Record the effect as done, inside the caller's transaction (the same one as the sync result).

    A record left by an earlier expired run is replaced; a concurrent duplicate is ignored.
    """
    now = dt.datetime.now(dt.UTC)
    values = {"key": key, "job_id": job_id, "outcome": "success", "result": dict(result), "created_at": now,
              "expires_at": now + dt.timedelta(seconds=ttl_seconds)}  # fmt: skip
    conn.execute(_upsert_statement(conn.dialect.name), values)


@functools.cache
def _upsert_statement(dialect: str) -> Insert:
    """Insert, or take over a record whose TTL ran out, in one statement (built once per dialect)."""
    return take_over_expired(r, dialect)

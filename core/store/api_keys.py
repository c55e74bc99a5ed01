"""Repository of ``api_keys``: per-tenant keys of the HTTP intake, stored as SHA-256 hashes only.

A key is a long random string shown once when it is created; the table keeps its SHA-256 hex digest.
A presented key is looked up by its digest (an index) and the stored digest is then compared with
``hmac.compare_digest``, so no timing difference depends on how much of a guess was right.
``last_used_at`` is written at most every few seconds (the caller decides), not on every request.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import secrets
from dataclasses import asdict, dataclass, fields
from typing import Any

from sqlalchemy import Connection, bindparam, insert, select, update

from calsync.core.model.ids import new_id
from calsync.core.model.vocabulary import ApiScope
from calsync.core.store.database import given_equal
from calsync.core.store.schema import api_keys as k
from calsync.core.store.schema import json_ready

KEY_PREFIX = "csk_"


@dataclass(frozen=True)
class ApiKey:
    """A stored key without its secret: whose it is and what it may do."""

    id: str
    tenant_id: str
    scope: ApiScope
    name: str | None
    created_at: dt.datetime
    last_used_at: dt.datetime | None
    revoked_at: dt.datetime | None

    def as_json(self) -> dict[str, Any]:
        """JSON-ready form for ``calsync api-keys list`` (never the key or its hash)."""
        return json_ready(asdict(self))


def key_hash(key: str) -> str:
    """The SHA-256 hex digest a key is stored and looked up by."""
    return hashlib.sha256(key.encode()).hexdigest()


_COLUMNS = [k.c[f.name] for f in fields(ApiKey)]  # an ApiKey is made of them, in order


def create(conn: Connection, *, tenant_id: str, scope: ApiScope, name: str | None = None) -> tuple[str, ApiKey]:
    """Mint a key for a tenant; returns the secret (shown once, never stored) and the stored record."""
    secret = KEY_PREFIX + secrets.token_urlsafe(32)
    record = ApiKey(new_id("key"), tenant_id, scope, name, dt.datetime.now(dt.UTC), None, None)
    conn.execute(insert(k).values(**asdict(record), key_hash=key_hash(secret)))
    return secret, record


_FIND_LIVE = select(*_COLUMNS, k.c.key_hash).where(k.c.key_hash == bindparam("k_hash"))  # every API request


def find_live(conn: Connection, presented: str) -> ApiKey | None:
    """The live key matching a presented secret, or None when it is unknown or revoked."""
    digest = key_hash(presented)
    row = conn.execute(_FIND_LIVE, {"k_hash": digest}).first()
    if row is None or not hmac.compare_digest(row.key_hash, digest) or row.revoked_at is not None:
        return None
    return ApiKey(*row[: len(_COLUMNS)])


def touch(conn: Connection, key_id: str, *, older_than: float) -> None:
    """Note that a key was used now, unless that was already noted within ``older_than`` seconds."""
    now = dt.datetime.now(dt.UTC)
    stale = now - dt.timedelta(seconds=older_than)
    conn.execute(
        update(k)
        .where(k.c.id == key_id, (k.c.last_used_at.is_(None)) | (k.c.last_used_at <= stale))
        .values(last_used_at=now)
    )


def list_keys(conn: Connection, tenant_id: str | None = None) -> list[ApiKey]:
    """Every key (of one tenant), oldest first."""
    query = select(*_COLUMNS).where(*given_equal((k.c.tenant_id, tenant_id))).order_by(k.c.created_at, k.c.id)
    return [ApiKey(*row) for row in conn.execute(query)]


def revoke(conn: Connection, key_id: str) -> bool:
    """Revoke a live key at once; False when there is no such live key."""
    result = conn.execute(
        update(k).where(k.c.id == key_id, k.c.revoked_at.is_(None)).values(revoked_at=dt.datetime.now(dt.UTC))
    )
    return bool(result.rowcount)

"""Repository of ``operators``: the people who use the console, not tenants (migration 0013).

An operator holds a role (``viewer`` reads, ``operator`` also acts) and either a key of their own, shown once when
it is made and stored as its SHA-256 digest exactly like a tenant's API key (core/store/api_keys.py), or no key at
all when a trusted proxy names them (oauth2-proxy's ``X-Forwarded-Email``). A presented key is looked up by its
digest (a unique index) and then compared with ``hmac.compare_digest``. Revoking an operator ends every session of
theirs in the same transaction, so a revoked operator's open browser is refused at its next request.
"""

from __future__ import annotations

import datetime as dt
import hmac
import secrets
from dataclasses import asdict, dataclass, fields
from typing import Any

from sqlalchemy import Connection, select, update
from sqlalchemy.exc import IntegrityError

from calsync.core.model.errors import InvalidRequest
from calsync.core.model.ids import new_id
from calsync.core.model.vocabulary import OperatorRole
from calsync.core.store.api_keys import key_hash
from calsync.core.store.schema import json_ready
from calsync.core.store.schema import operator_sessions as s
from calsync.core.store.schema import operators as o

KEY_PREFIX = "cso_"


@dataclass(frozen=True)
class OperatorRecord:
    """A stored operator without their key: who, what they may do, how they sign in."""

    id: str
    name: str
    role: OperatorRole
    created_at: dt.datetime
    revoked_at: dt.datetime | None

    def as_json(self) -> dict[str, Any]:
        """JSON-ready form for ``calsync operators list`` (never the key or its hash)."""
        return json_ready(asdict(self))


_COLUMNS = [o.c[f.name] for f in fields(OperatorRecord)]  # an OperatorRecord is made of them, in order


def create(
    conn: Connection, *, name: str, role: OperatorRole, proxy: bool = False
) -> tuple[str | None, OperatorRecord]:
    """Make an operator; returns their key (shown once, never stored; None for a trusted proxy's user, who has
    none) and the stored record. A name already taken (revoked or not: the audit log names people) is refused."""
    check_name(name)
    secret = None if proxy else KEY_PREFIX + secrets.token_urlsafe(32)
    record = OperatorRecord(new_id("op"), name, role, dt.datetime.now(dt.UTC), None)
    digest = None if secret is None else key_hash(secret)
    try:  # the unique name refuses it; the caller's transaction is over then (it rolls back)
        conn.execute(o.insert().values(**asdict(record), key_hash=digest))
    except IntegrityError:
        raise InvalidRequest(f"an operator named {name!r} exists already") from None
    return secret, record


def check_name(name: str) -> None:
    """Refuse a name the audit log could not show plainly or a proxy's header could not carry: blank, padded, over
    256 characters, or with a control character."""
    if not name or name != name.strip() or len(name) > 256 or any(ord(c) < 0x20 or ord(c) == 0x7F for c in name):
        raise InvalidRequest(
            "an operator's name must be 1 to 256 printable characters without leading or trailing blanks"
        )


def list_operators(conn: Connection) -> list[OperatorRecord]:
    """Every operator, oldest first (revoked ones included)."""
    return [OperatorRecord(*row) for row in conn.execute(select(*_COLUMNS).order_by(o.c.created_at, o.c.id))]


def find_by_key(conn: Connection, presented: str) -> OperatorRecord | None:
    """The live operator whose key was presented, or None when it is unknown or revoked."""
    digest = key_hash(presented)
    row = conn.execute(select(*_COLUMNS, o.c.key_hash).where(o.c.key_hash == digest)).first()
    if row is None or not hmac.compare_digest(row.key_hash, digest) or row.revoked_at is not None:
        return None
    return OperatorRecord(*row[: len(_COLUMNS)])


def find_by_name(conn: Connection, name: str) -> OperatorRecord | None:
    """The live operator of this name (a trusted proxy's user), or None when there is none or they are revoked."""
    row = conn.execute(select(*_COLUMNS).where(o.c.name == name, o.c.revoked_at.is_(None))).first()
    return None if row is None else OperatorRecord(*row)


def revoke(conn: Connection, name: str) -> bool:
    """Revoke a live operator and end all their sessions at once; False when there is no such live operator."""
    now = dt.datetime.now(dt.UTC)
    found = conn.execute(
        update(o).where(o.c.name == name, o.c.revoked_at.is_(None)).values(revoked_at=now).returning(o.c.id)
    ).first()
    if found is None:
        return False
    conn.execute(update(s).where(s.c.operator_id == found.id, s.c.ended_at.is_(None)).values(ended_at=now))
    return True

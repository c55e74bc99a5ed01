"""Repository of ``operator_sessions``: signed-in browsers (and trusted-proxy users), their CSRF tokens, their idle
expiry.

A session is identified by a random cookie value the browser holds; the table keeps only its SHA-256 digest, so a
copy of the database opens no console. Each session has its own random CSRF token, which every state-changing form
carries back. A session is live while it is not ended (signed out, or its operator revoked), its operator is not
revoked, and it was used within the idle expiry. ``last_seen_at`` is written at most every :data:`TOUCH_EVERY`
seconds, not on every request: a page that refreshes every 2 s must not write the database every 2 s.

A trusted proxy's user has no cookie: the proxy names them on every request. They get one session per operator all
the same (id ``proxy:<operator id>:<random>``, which no cookie's digest can equal), for its CSRF token and expiry.
"""

from __future__ import annotations

import datetime as dt
import secrets
from dataclasses import dataclass

from sqlalchemy import ColumnElement, Connection, select, update

from calsync.core.model.vocabulary import OperatorRole
from calsync.core.store.api_keys import key_hash
from calsync.core.store.operators import OperatorRecord
from calsync.core.store.schema import operator_sessions as s
from calsync.core.store.schema import operators as o

#: Seconds between two writes of a session's ``last_seen_at`` (the idle expiry is that much less exact).
TOUCH_EVERY = 30.0
_PROXY = "proxy:"


@dataclass(frozen=True)
class Session:
    """A live session: its id (the cookie's digest), the operator it belongs to (their id, name: what the audit log
    records, and role), its CSRF token."""

    id: str
    operator_id: str
    name: str
    role: OperatorRole
    csrf_token: str
    last_seen_at: dt.datetime

    @property
    def can_act(self) -> bool:
        """Whether this operator may change anything (the pages hide their buttons otherwise)."""
        return self.role == "operator"


def start(conn: Connection, operator: OperatorRecord, *, proxied: bool = False) -> tuple[str, Session]:
    """Start a session for a signed-in operator; returns the cookie's value (never stored; none is given to a
    trusted proxy's user, whose session id is ``proxy:<operator id>:<random>``) and the session."""
    cookie, csrf, now = secrets.token_urlsafe(32), secrets.token_urlsafe(32), dt.datetime.now(dt.UTC)
    session_id = f"{_PROXY}{operator.id}:{secrets.token_hex(16)}" if proxied else key_hash(cookie)
    conn.execute(s.insert().values(id=session_id, operator_id=operator.id, csrf_token=csrf, created_at=now,
                                   last_seen_at=now))  # fmt: skip
    return cookie, Session(session_id, operator.id, operator.name, operator.role, csrf, now)


_LIVE = (
    select(s.c.id, s.c.operator_id, o.c.name, o.c.role, s.c.csrf_token, s.c.last_seen_at)
    .join(o, o.c.id == s.c.operator_id)
    .where(s.c.ended_at.is_(None), o.c.revoked_at.is_(None))
)


def _live(conn: Connection, idle_seconds: float, *where: ColumnElement[bool]) -> Session | None:
    """The most recently used live session matching ``where``, or None."""
    idle_since = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=idle_seconds)
    query = _LIVE.where(*where, s.c.last_seen_at > idle_since).order_by(s.c.last_seen_at.desc()).limit(1)
    row = conn.execute(query).first()
    return None if row is None else Session(*row)


def find(conn: Connection, cookie: str, *, idle_seconds: float) -> Session | None:
    """The live session of a cookie's value, or None (unknown, ended, idle too long, operator revoked).

    Looked up by the primary key (the cookie's digest); no comparison of secrets happens in Python."""
    return _live(conn, idle_seconds, s.c.id == key_hash(cookie))


def proxy_session(conn: Connection, operator_id: str, *, idle_seconds: float) -> Session | None:
    """A trusted proxy's user's live session, or None (then :func:`start` one, ``proxied``).

    By ``ix_operator_sessions_operator``: an operator has few sessions."""
    return _live(conn, idle_seconds, s.c.operator_id == operator_id, s.c.id.startswith(_PROXY))


def needs_touch(session: Session) -> bool:
    """Whether the session's use is to be noted (:func:`touch`): it was last noted :data:`TOUCH_EVERY` s ago."""
    return (dt.datetime.now(dt.UTC) - session.last_seen_at).total_seconds() >= TOUCH_EVERY


def touch(conn: Connection, session_id: str) -> None:
    """Note that a session was used now (the caller asked :func:`needs_touch` first)."""
    now = dt.datetime.now(dt.UTC)
    conn.execute(update(s).where(s.c.id == session_id, s.c.ended_at.is_(None)).values(last_seen_at=now))


def end(conn: Connection, session_id: str) -> None:
    """End a session (signing out): its cookie opens nothing from now on."""
    conn.execute(update(s).where(s.c.id == session_id, s.c.ended_at.is_(None)).values(ended_at=dt.datetime.now(dt.UTC)))

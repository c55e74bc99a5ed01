"""The memory provider: a calendar kept in SQLite, with fault injection, for tests and the demo.

It behaves like a careful real provider: deterministic ids derived from ``target.sync_key`` (so a
retried create adopts the event a lost response created), "already gone" deletes succeed, writes
that change nothing are no-ops, and every call is logged with its effect. Its state lives in one
SQLite database (``:memory:`` in unit tests; a file shared by every process of a data dir
otherwise), so a test or the demo can inspect what a worker subprocess did and inject faults into it.

Fault rules (:meth:`MemoryProvider.add_fault`) match by operation, account, entity or title and raise
one of :data:`FAULT_ERRORS`, optionally after a delay and optionally after applying the write
(``after=True``: the effect happens, the response is "lost").
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import sqlite3
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from core.errors import (
    AuthRevoked,
    CalsyncError,
    Forbidden,
    InvalidRequest,
    ProviderTimeout,
    ProviderUnavailable,
    RateLimited,
)
from providers.base import Account, EventState, ExternalRef, ProviderName, SendUpdates, Target

if TYPE_CHECKING:
    from core.settings import Settings

FAULT_ERRORS: dict[str, type[CalsyncError]] = {
    "unavailable": ProviderUnavailable,
    "timeout": ProviderTimeout,
    "rate_limited": RateLimited,
    "auth": AuthRevoked,
    "forbidden": Forbidden,
    "invalid": InvalidRequest,
}

Effect = Literal["created", "updated", "restored", "adopted", "unchanged", "deleted", "already_gone"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS events (
    account_id TEXT NOT NULL, external_id TEXT NOT NULL, sync_key TEXT NOT NULL,
    etag TEXT NOT NULL, body TEXT NOT NULL, status TEXT NOT NULL, writes INTEGER NOT NULL,
    PRIMARY KEY (account_id, external_id));
CREATE TABLE IF NOT EXISTS calls (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, op TEXT NOT NULL, account_id TEXT NOT NULL,
    entity_id TEXT NOT NULL, external_id TEXT, version INTEGER, effect TEXT, error TEXT, at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS faults (
    id INTEGER PRIMARY KEY AUTOINCREMENT, op TEXT, account_id TEXT, entity_id TEXT, title TEXT,
    error TEXT, message TEXT, retry_after REAL, delay_ms INTEGER NOT NULL, after INTEGER NOT NULL,
    remaining INTEGER);
"""


@dataclass(frozen=True)
class StoredEvent:
    """An event as the memory calendar holds it."""

    account_id: str
    external_id: str
    sync_key: str
    etag: str
    body: dict[str, Any]
    status: str
    writes: int


@dataclass(frozen=True)
class Call:
    """One provider call, as logged (``version``: the event version an upsert carried)."""

    op: str
    account_id: str
    entity_id: str
    external_id: str | None
    version: int | None
    effect: str | None
    error: str | None
    at: float


@dataclass(frozen=True)
class _Fault:
    id: int
    error: str | None
    message: str | None
    retry_after: float | None
    delay_ms: int
    after: bool


def external_id_for(sync_key: str) -> str:
    """The deterministic id of a target's event: a retried create finds what a lost create made."""
    return "mem" + hashlib.sha256(sync_key.encode()).hexdigest()[:29]


def _body(event: EventState) -> dict[str, Any]:
    return {
        "title": event.title,
        "start": event.start.isoformat(),
        "end": event.end.isoformat(),
        "time_zone": event.time_zone,
        "all_day": event.all_day,
        "location": event.location,
        "description": event.description,
        "attendees": list(event.attendees),
        "version": event.version,
        "send_updates": event.send_updates,
    }


class MemoryProvider:
    """A provider whose calendar is a SQLite database."""

    name: ProviderName = "memory"

    def __init__(self, path: str | Path = ":memory:") -> None:
        self._path = str(path)
        self._shared: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        if self._path == ":memory:":
            self._shared = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        else:
            Path(self._path).parent.mkdir(parents=True, exist_ok=True)
        with self._connection() as conn:
            conn.executescript(_SCHEMA)

    @classmethod
    def from_settings(cls, settings: Settings) -> MemoryProvider:
        """The memory calendar of this data dir, shared by all its processes."""
        return cls(settings.effective_memory_provider_path)

    @contextlib.contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        if self._shared is not None:
            with self._lock:
                yield self._shared
            return
        conn = sqlite3.connect(self._path, timeout=30, isolation_level=None)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            yield conn
        finally:
            conn.close()

    @contextlib.contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._connection() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    # --- the Provider protocol -----------------------------------------------------------------

    def upsert(self, account: Account, event: EventState, target: Target) -> ExternalRef:
        """Create, adopt, restore or update the target's event."""
        fault = self._take_fault("upsert", account.id, target.event_id, event.title)
        if fault is not None and not fault.after:
            self._fail(fault, "upsert", account.id, target.event_id)
        external_id = target.external_id or external_id_for(target.sync_key)
        body = _body(event)
        with self._tx() as conn:
            row = conn.execute(
                "SELECT body, status, etag FROM events WHERE account_id=? AND external_id=?", (account.id, external_id)
            ).fetchone()
            effect: Effect
            if row is None:
                effect = "created"
                etag = self._etag(external_id, body, 1)
                conn.execute(
                    "INSERT INTO events VALUES (?, ?, ?, ?, ?, 'confirmed', 1)",
                    (account.id, external_id, target.sync_key, etag, json.dumps(body)),
                )
            elif json.loads(row[0]) == body and row[1] == "confirmed":
                effect = "unchanged" if target.external_id else "adopted"
                etag = row[2]
            else:
                effect = "restored" if row[1] == "cancelled" else ("updated" if target.external_id else "adopted")
                writes = conn.execute(
                    "SELECT writes FROM events WHERE account_id=? AND external_id=?", (account.id, external_id)
                ).fetchone()[0]
                etag = self._etag(external_id, body, writes + 1)
                conn.execute(
                    "UPDATE events SET body=?, status='confirmed', etag=?, writes=writes+1 "
                    "WHERE account_id=? AND external_id=?",
                    (json.dumps(body), etag, account.id, external_id),
                )
            self._log(conn, "upsert", account.id, target.event_id, external_id, effect, version=event.version)
        if fault is not None:
            self._fail(fault, "upsert", account.id, target.event_id)
        return ExternalRef(external_id, etag)

    def delete(self, account: Account, target: Target, *, send_updates: SendUpdates = "none") -> None:
        """Cancel the target's event; an unknown or already cancelled event is success."""
        fault = self._take_fault("delete", account.id, target.event_id, None)
        if fault is not None and not fault.after:
            self._fail(fault, "delete", account.id, target.event_id)
        external_id = target.external_id or external_id_for(target.sync_key)
        with self._tx() as conn:
            changed = conn.execute(
                "UPDATE events SET status='cancelled', writes=writes+1 "
                "WHERE account_id=? AND external_id=? AND status='confirmed'",
                (account.id, external_id),
            ).rowcount
            effect = "deleted" if changed else "already_gone"
            self._log(conn, "delete", account.id, target.event_id, external_id, effect)
        if fault is not None:
            self._fail(fault, "delete", account.id, target.event_id)

    # --- faults --------------------------------------------------------------------------------

    def add_fault(
        self,
        *,
        error: str | None = "unavailable",
        op: Literal["upsert", "delete"] | None = None,
        account_id: str | None = None,
        entity_id: str | None = None,
        title: str | None = None,
        times: int | None = None,
        message: str | None = None,
        retry_after: float | None = None,
        delay_ms: int = 0,
        after: bool = False,
    ) -> int:
        """Break matching calls: ``times`` of them (None = all), raising ``error`` (None = only delay)."""
        if error is not None and error not in FAULT_ERRORS:
            raise ValueError(f"unknown fault error {error!r}; choose from {sorted(FAULT_ERRORS)}")
        if title is not None:
            re.compile(title)
        with self._tx() as conn:
            cursor = conn.execute(
                "INSERT INTO faults (op, account_id, entity_id, title, error, message, retry_after, delay_ms, after,"
                " remaining) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (op, account_id, entity_id, title, error, message, retry_after, delay_ms, int(after), times),
            )
            return int(cursor.lastrowid or 0)

    def clear_faults(self) -> None:
        """Remove every fault rule."""
        with self._tx() as conn:
            conn.execute("DELETE FROM faults")

    def _take_fault(self, op: str, account_id: str, entity_id: str, title: str | None) -> _Fault | None:
        with self._connection() as conn:
            if conn.execute("SELECT 1 FROM faults LIMIT 1").fetchone() is None:
                return None  # the common case, without taking the write lock
        with self._tx() as conn:
            rows = conn.execute(
                "SELECT id, op, account_id, entity_id, title, error, message, retry_after, delay_ms, after, remaining"
                " FROM faults ORDER BY id"
            ).fetchall()
            for fid, f_op, f_account, f_entity, f_title, error, message, retry_after, delay_ms, after, left in rows:
                if (f_op and f_op != op) or (f_account and f_account != account_id):
                    continue
                if (f_entity and f_entity != entity_id) or (f_title and not (title and re.search(f_title, title))):
                    continue
                if left is not None:
                    if left <= 1:
                        conn.execute("DELETE FROM faults WHERE id=?", (fid,))
                    else:
                        conn.execute("UPDATE faults SET remaining=remaining-1 WHERE id=?", (fid,))
                return _Fault(fid, error, message, retry_after, delay_ms, bool(after))
        return None

    def _fail(self, fault: _Fault, op: str, account_id: str, entity_id: str) -> None:
        if fault.delay_ms:
            time.sleep(fault.delay_ms / 1000)
        if fault.error is None:
            return
        cls = FAULT_ERRORS[fault.error]
        text = fault.message or f"injected {fault.error} fault"
        exc = cls(text, retry_after=fault.retry_after) if issubclass(cls, RateLimited) else cls(text)
        with self._tx() as conn:
            self._log(conn, op, account_id, entity_id, None, None, error=type(exc).__name__)
        raise exc

    # --- inspection ----------------------------------------------------------------------------

    def events(self, account_id: str | None = None) -> list[StoredEvent]:
        """Every stored event (cancelled ones too), optionally of one account."""
        query = "SELECT account_id, external_id, sync_key, etag, body, status, writes FROM events"
        params: tuple[str, ...] = ()
        if account_id is not None:
            query += " WHERE account_id=?"
            params = (account_id,)
        with self._tx() as conn:
            rows = conn.execute(query + " ORDER BY account_id, external_id", params).fetchall()
        return [StoredEvent(a, e, k, t, json.loads(b), s, w) for a, e, k, t, b, s, w in rows]

    def calls(self) -> list[Call]:
        """Every call in order, with its effect or error."""
        with self._tx() as conn:
            rows = conn.execute(
                "SELECT op, account_id, entity_id, external_id, version, effect, error, at FROM calls ORDER BY seq"
            ).fetchall()
        return [Call(*row) for row in rows]

    def reset(self) -> None:
        """Forget events, calls and faults."""
        with self._tx() as conn:
            conn.execute("DELETE FROM events")
            conn.execute("DELETE FROM calls")
            conn.execute("DELETE FROM faults")

    @staticmethod
    def _etag(external_id: str, body: dict[str, Any], writes: int) -> str:
        digest = hashlib.sha256(f"{external_id}:{writes}:{json.dumps(body, sort_keys=True)}".encode()).hexdigest()
        return f'"{digest[:16]}"'

    @staticmethod
    def _log(
        conn: sqlite3.Connection,
        op: str,
        account_id: str,
        entity_id: str,
        external_id: str | None,
        effect: str | None,
        *,
        error: str | None = None,
        version: int | None = None,
    ) -> None:
        conn.execute(
            "INSERT INTO calls (op, account_id, entity_id, external_id, version, effect, error, at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (op, account_id, entity_id, external_id, version, effect, error, time.time()),
        )

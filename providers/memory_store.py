"""Where the memory provider keeps its calendar: a SQLite database in this process (``:memory:``, the default) or
in a file every process that opens it shares, so a test or the demo can inspect what a worker subprocess did and
inject faults into it (the data dir's ``memory-provider.sqlite3``).

A store keeps one connection, used by one thread at a time under its lock. Writers of a file take turns under that
lock and an ``flock`` on ``<file>.lock``, which wakes the next writer (of any process) as soon as the lock is free:
SQLite's own busy handler sleeps 1, 2, 5, 10… ms between retries, which left 8 worker threads mostly waiting
(docs/notes/performance.md). The newest ``CALL_LOG_LIMIT`` calls are kept (up to a tenth more between prunes).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import re
import sqlite3
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

CALL_LOG_LIMIT = 10_000  # calls a memory calendar remembers (the newest; a worker's log must not grow forever)


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
class MemoryFaultRule:
    """A rule that breaks matching calls; ``remaining`` None means every call, else that many more."""

    id: int
    op: str | None
    account_id: str | None
    entity_id: str | None
    title: str | None  # a regular expression searched in the event's title
    error: str | None  # a key of providers.memory.FAULT_ERRORS; None only delays
    message: str | None
    retry_after: float | None
    delay_ms: int
    after: bool  # apply the write, then fail (the response is "lost")
    remaining: int | None

    def matches(self, op: str, account_id: str, entity_id: str, title: str | None) -> bool:
        """Whether this rule applies to a call."""
        if (self.op and self.op != op) or (self.account_id and self.account_id != account_id):
            return False
        if self.entity_id and self.entity_id != entity_id:
            return False
        return not self.title or bool(title and re.search(self.title, title))


# One JSON record (the dataclass's fields) per row; a fault rule's id and remaining count are the columns'. Named
# apart from an older release's per-field tables, which a file it wrote keeps, unread.
_SCHEMA = """
CREATE TABLE IF NOT EXISTS calendar_events (
    account_id TEXT NOT NULL, external_id TEXT NOT NULL, event TEXT NOT NULL, PRIMARY KEY (account_id, external_id));
CREATE TABLE IF NOT EXISTS call_log (seq INTEGER PRIMARY KEY AUTOINCREMENT, call TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS fault_rules (id INTEGER PRIMARY KEY AUTOINCREMENT, rule TEXT NOT NULL, remaining INTEGER);
CREATE TABLE IF NOT EXISTS event_changes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, account_id TEXT NOT NULL, external_id TEXT NOT NULL,
    UNIQUE (account_id, external_id));
"""


class CalendarStore:
    """A calendar in SQLite: ``path`` None (or ``:memory:``) keeps it in this process, a file shares it."""

    def __init__(self, path: str | Path | None = None) -> None:
        self._path = None if path is None or str(path) == ":memory:" else Path(path)
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._lock_file: IO[bytes] | None = None

    def _connection(self) -> sqlite3.Connection:
        # Under self._lock. Opened on first use: no I/O in the constructor.
        if self._conn is None:
            if self._path is not None and self._lock_file is None:
                self._path.parent.mkdir(parents=True, exist_ok=True)
                self._lock_file = open(self._path.with_name(self._path.name + ".lock"), "a+b")  # noqa: SIM115 (kept)
            conn = sqlite3.connect(self._path or ":memory:", timeout=30, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")  # a test calendar: no fsync per commit
            conn.execute("PRAGMA mmap_size=268435456")  # pages read through the map, not a pread each
            conn.executescript(_SCHEMA)
            self._conn = conn
        return self._conn

    def faults(self) -> list[MemoryFaultRule]:
        """The fault rules, as another process may have just changed them, read without taking the write lock."""
        with self._lock:
            return CalendarTx(self._connection()).faults()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[CalendarTx]:
        """One atomic step (``BEGIN IMMEDIATE``): committed at the end, rolled back on an exception."""
        with self._lock:
            conn = self._connection()
            if self._lock_file is not None:
                fcntl.flock(self._lock_file, fcntl.LOCK_EX)
            try:
                conn.execute("BEGIN IMMEDIATE")
                with conn:  # sqlite3's own scope: COMMIT at the end, ROLLBACK on any exception
                    yield CalendarTx(conn)
            finally:
                if self._lock_file is not None:
                    fcntl.flock(self._lock_file, fcntl.LOCK_UN)

    def close(self) -> None:
        """Close a file's connection (the next call opens a new one); a calendar in this process stays open."""
        with self._lock:
            if self._path is not None and self._conn is not None:
                self._conn.close()
                self._conn = None


class CalendarTx:
    """What the provider does inside one atomic step of a store."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def find(self, account_id: str, external_id: str) -> StoredEvent | None:
        row = self._conn.execute(
            "SELECT event FROM calendar_events WHERE account_id=? AND external_id=?", (account_id, external_id)
        ).fetchone()
        return StoredEvent(**json.loads(row[0])) if row else None

    def save(self, event: StoredEvent) -> None:
        self._conn.execute(
            "INSERT OR REPLACE INTO calendar_events VALUES (?, ?, ?)",
            (event.account_id, event.external_id, json.dumps(vars(event))),
        )
        # The event's latest change, numbered after every other (the old row goes): what a read-back's cursor counts.
        self._conn.execute(
            "INSERT OR REPLACE INTO event_changes (account_id, external_id) VALUES (?, ?)",
            (event.account_id, event.external_id),
        )

    def last_change(self) -> int:
        """The number of the newest change of any event (0: none yet): a read-back's next cursor."""
        return int(self._conn.execute("SELECT COALESCE(MAX(seq), 0) FROM event_changes").fetchone()[0])

    def changed_since(self, account_id: str, seq: int) -> list[StoredEvent]:
        """The account's events changed after change ``seq``, oldest change first (cancelled ones too)."""
        rows = self._conn.execute(
            "SELECT e.event FROM event_changes c JOIN calendar_events e USING (account_id, external_id)"
            " WHERE c.account_id=? AND c.seq > ? ORDER BY c.seq",
            (account_id, seq),
        ).fetchall()
        return [StoredEvent(**json.loads(event)) for (event,) in rows]

    def log(self, call: Call) -> None:
        cursor = self._conn.execute("INSERT INTO call_log (call) VALUES (?)", (json.dumps(vars(call)),))
        seq, every = int(cursor.lastrowid or 0), max(1, CALL_LOG_LIMIT // 10)
        if seq % every == 0:  # a bounded log: now and then the calls beyond the newest CALL_LOG_LIMIT go
            self._conn.execute("DELETE FROM call_log WHERE seq <= ?", (seq - CALL_LOG_LIMIT,))

    def faults(self) -> list[MemoryFaultRule]:
        rows = self._conn.execute("SELECT id, rule, remaining FROM fault_rules ORDER BY id").fetchall()
        return [MemoryFaultRule(**{**json.loads(rule), "id": fault_id, "remaining": remaining})
                for fault_id, rule, remaining in rows]  # fmt: skip

    def add_fault(self, rule: MemoryFaultRule) -> int:
        cursor = self._conn.execute(
            "INSERT INTO fault_rules (rule, remaining) VALUES (?, ?)", (json.dumps(vars(rule)), rule.remaining)
        )
        return int(cursor.lastrowid or 0)

    def set_remaining(self, fault_id: int, remaining: int) -> None:
        if remaining <= 0:
            self._conn.execute("DELETE FROM fault_rules WHERE id=?", (fault_id,))
        else:
            self._conn.execute("UPDATE fault_rules SET remaining=? WHERE id=?", (remaining, fault_id))

    def events(self, account_id: str | None) -> list[StoredEvent]:
        where, params = ("WHERE account_id=?", (account_id,)) if account_id is not None else ("", ())
        rows = self._conn.execute(f"SELECT event FROM calendar_events {where} ORDER BY account_id, external_id",
                                  params).fetchall()  # fmt: skip
        return [StoredEvent(**json.loads(event)) for (event,) in rows]

    def calls(self) -> list[Call]:
        rows = self._conn.execute("SELECT call FROM call_log ORDER BY seq").fetchall()
        return [Call(**json.loads(call)) for (call,) in rows]

    def clear_faults(self) -> None:
        self._conn.execute("DELETE FROM fault_rules")

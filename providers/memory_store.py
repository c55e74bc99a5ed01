"""Where the memory provider keeps its calendar: a dict in this process, or a SQLite file shared by processes.

Both stores offer the same transaction (:class:`CalendarTx`), so the provider's behaviour is written
once (providers/memory.py) and tested against both (tests/providers/test_memory_provider.py):

- :class:`DictStore`, the default: plain dicts under one lock. Unit tests and the benchmark use it;
  a calendar kept in SQLite cost a sync job more CPU than the rest of its I/O (benchmarks/pipeline.py).
- :class:`SqliteStore`: a SQLite file, for a worker subprocess and the test or demo that watches it
  and injects faults into it (the data dir's ``memory-provider.sqlite3``).

Both keep the newest ``CALL_LOG_LIMIT`` calls (the SQLite file up to a tenth more between prunes).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import fcntl
import json
import re
import sqlite3
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

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


class CalendarTx(Protocol):
    """What the provider does inside one atomic step of a store."""

    def find(self, account_id: str, external_id: str) -> StoredEvent | None:
        """The stored event, cancelled or not."""

    def save(self, event: StoredEvent) -> None:
        """Insert or replace an event."""

    def log(self, call: Call) -> None:
        """Append a call to the log."""

    def faults(self) -> list[MemoryFaultRule]:
        """Every fault rule, oldest first."""

    def add_fault(self, rule: MemoryFaultRule) -> int:
        """Store a rule (its ``id`` is ignored) and return its id."""

    def set_remaining(self, fault_id: int, remaining: int) -> None:
        """Count a rule down; at 0 it is removed."""

    def events(self, account_id: str | None) -> list[StoredEvent]:
        """Every stored event, optionally of one account, by account then external id."""

    def calls(self) -> list[Call]:
        """Every logged call, in order."""

    def clear(self, *, events: bool, calls: bool, faults: bool) -> None:
        """Forget the chosen parts."""


class CalendarStore(Protocol):
    """A memory calendar's storage."""

    def has_faults(self) -> bool:
        """A cheap check, so the common call (no fault anywhere) takes no write lock."""

    def transaction(self) -> contextlib.AbstractContextManager[CalendarTx]:
        """One atomic step: every change in it is applied together, or none is."""

    def close(self) -> None:
        """Release what the store holds open (its connections)."""


class DictStore:
    """A calendar in this process' memory."""

    def __init__(self, *, call_limit: int = CALL_LOG_LIMIT) -> None:
        self._lock = threading.Lock()
        self._events: dict[tuple[str, str], StoredEvent] = {}
        self._calls: collections.deque[Call] = collections.deque(maxlen=call_limit)
        self._faults: dict[int, MemoryFaultRule] = {}
        self._next_fault = 1

    def has_faults(self) -> bool:
        """Whether any fault rule exists."""
        return bool(self._faults)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[CalendarTx]:
        """The lock, held for the step; an exception undoes the step's changes."""
        with self._lock:
            tx = _DictTx(self)
            try:
                yield tx
            except BaseException:
                tx.undo()
                raise

    def close(self) -> None:
        """Nothing to release."""


class _DictTx:
    def __init__(self, store: DictStore) -> None:
        self._store = store
        self._undo: list[tuple[str, Any]] = []

    def find(self, account_id: str, external_id: str) -> StoredEvent | None:
        return self._store._events.get((account_id, external_id))

    def save(self, event: StoredEvent) -> None:
        key = (event.account_id, event.external_id)
        self._undo.append(("event", (key, self._store._events.get(key))))
        self._store._events[key] = event

    def log(self, call: Call) -> None:
        self._undo.append(("call", None))
        self._store._calls.append(call)

    def faults(self) -> list[MemoryFaultRule]:
        return sorted(self._store._faults.values(), key=lambda rule: rule.id)

    def add_fault(self, rule: MemoryFaultRule) -> int:
        fault_id = self._store._next_fault
        self._store._next_fault += 1
        self._undo.append(("fault", (fault_id, None)))
        self._store._faults[fault_id] = dataclasses.replace(rule, id=fault_id)
        return fault_id

    def set_remaining(self, fault_id: int, remaining: int) -> None:
        rule = self._store._faults[fault_id]
        self._undo.append(("fault", (fault_id, rule)))
        if remaining <= 0:
            del self._store._faults[fault_id]
        else:
            self._store._faults[fault_id] = dataclasses.replace(rule, remaining=remaining)

    def events(self, account_id: str | None) -> list[StoredEvent]:
        found = [e for e in self._store._events.values() if account_id is None or e.account_id == account_id]
        return [dataclasses.replace(e, body=json.loads(json.dumps(e.body))) for e in sorted(found, key=_event_order)]

    def calls(self) -> list[Call]:
        return list(self._store._calls)

    def clear(self, *, events: bool, calls: bool, faults: bool) -> None:
        # Only reset() clears, and it is not undone: it has nothing after it that could fail.
        if events:
            self._store._events.clear()
        if calls:
            self._store._calls.clear()
        if faults:
            self._store._faults.clear()

    def undo(self) -> None:
        for kind, value in reversed(self._undo):
            if kind == "call":
                self._store._calls.pop()
                continue
            key, before = value
            table: dict[Any, Any] = self._store._events if kind == "event" else self._store._faults
            if before is None:
                table.pop(key, None)
            else:
                table[key] = before


def _event_order(event: StoredEvent) -> tuple[str, str]:
    return event.account_id, event.external_id


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
_EVENT_COLUMNS = "account_id, external_id, sync_key, etag, body, status, writes"
_FAULT_COLUMNS = "id, op, account_id, entity_id, title, error, message, retry_after, delay_ms, after, remaining"


class SqliteStore:
    """A calendar in a SQLite file, which every process that opens the file shares.

    Each thread keeps one connection (opening one per call cost a deployed worker about 14 % of its
    CPU, benchmarks/worker.py). Writers take turns under a thread lock and an ``flock`` on
    ``<file>.lock``, which wake the next writer as soon as the lock is free: SQLite's own busy
    handler sleeps 1, 2, 5, 10… ms between retries, which left 8 worker threads mostly waiting
    (a 1 x 8 worker drained 160 jobs/s with it, 465 without; benchmarks/worker.py, 2026-12-01).
    """

    def __init__(self, path: str | Path, *, call_limit: int = CALL_LOG_LIMIT) -> None:
        self._call_limit = call_limit
        self._path = Path(path)
        self._path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._writer = threading.Lock()
        self._lock_file = open(self._path.with_name(self._path.name + ".lock"), "a+b")  # noqa: SIM115 (kept open)
        self._open: list[sqlite3.Connection] = []
        self._open_lock = threading.Lock()
        with self._writer:
            self._connection().executescript(_SCHEMA)

    def _connection(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self._path, timeout=30, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")  # a test calendar: no fsync per commit
            conn.execute("PRAGMA mmap_size=268435456")  # pages read through the map, not a pread each
            with self._open_lock:
                self._open.append(conn)
            self._local.conn = conn
        return conn

    def has_faults(self) -> bool:
        """Whether any fault rule exists (another process may have added one)."""
        return self._connection().execute("SELECT 1 FROM faults LIMIT 1").fetchone() is not None

    @contextlib.contextmanager
    def transaction(self) -> Iterator[CalendarTx]:
        """A write transaction (``BEGIN IMMEDIATE``): committed at the end, rolled back on an exception."""
        conn = self._connection()
        with self._writer:
            fcntl.flock(self._lock_file, fcntl.LOCK_EX)
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    yield _SqliteTx(conn, self._call_limit)
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise
                conn.execute("COMMIT")
            finally:
                fcntl.flock(self._lock_file, fcntl.LOCK_UN)

    def close(self) -> None:
        """Close every thread's connection (each thread opens a new one on its next call)."""
        with self._open_lock:
            connections, self._open = self._open, []
        self._local = threading.local()
        for conn in connections:
            conn.close()


class _SqliteTx:
    def __init__(self, conn: sqlite3.Connection, call_limit: int) -> None:
        self._conn = conn
        self._call_limit = call_limit

    def find(self, account_id: str, external_id: str) -> StoredEvent | None:
        row = self._conn.execute(
            f"SELECT {_EVENT_COLUMNS} FROM events WHERE account_id=? AND external_id=?", (account_id, external_id)
        ).fetchone()
        return _stored_event(row) if row else None

    def save(self, event: StoredEvent) -> None:
        self._conn.execute(
            f"INSERT OR REPLACE INTO events ({_EVENT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (event.account_id, event.external_id, event.sync_key, event.etag, json.dumps(event.body), event.status,
             event.writes),
        )  # fmt: skip

    def log(self, call: Call) -> None:
        cursor = self._conn.execute(
            "INSERT INTO calls (op, account_id, entity_id, external_id, version, effect, error, at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                call.op,
                call.account_id,
                call.entity_id,
                call.external_id,
                call.version,
                call.effect,
                call.error,
                call.at,
            ),  # not dataclasses.astuple: it deep-copies, ~0.1 ms per call (benchmarks/worker.py)
        )
        seq, every = int(cursor.lastrowid or 0), max(1, self._call_limit // 10)
        if seq % every == 0:  # a bounded log: now and then the calls beyond the newest call_limit go
            self._conn.execute("DELETE FROM calls WHERE seq <= ?", (seq - self._call_limit,))

    def faults(self) -> list[MemoryFaultRule]:
        rows = self._conn.execute(f"SELECT {_FAULT_COLUMNS} FROM faults ORDER BY id").fetchall()
        return [_fault_rule(row) for row in rows]

    def add_fault(self, rule: MemoryFaultRule) -> int:
        values = dataclasses.astuple(rule)[1:]
        cursor = self._conn.execute(
            f"INSERT INTO faults ({_FAULT_COLUMNS.removeprefix('id, ')}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", values
        )
        return int(cursor.lastrowid or 0)

    def set_remaining(self, fault_id: int, remaining: int) -> None:
        if remaining <= 0:
            self._conn.execute("DELETE FROM faults WHERE id=?", (fault_id,))
        else:
            self._conn.execute("UPDATE faults SET remaining=? WHERE id=?", (remaining, fault_id))

    def events(self, account_id: str | None) -> list[StoredEvent]:
        where, params = ("WHERE account_id=?", (account_id,)) if account_id is not None else ("", ())
        rows = self._conn.execute(f"SELECT {_EVENT_COLUMNS} FROM events {where} ORDER BY account_id, external_id",
                                  params).fetchall()  # fmt: skip
        return [_stored_event(row) for row in rows]

    def calls(self) -> list[Call]:
        rows = self._conn.execute(
            "SELECT op, account_id, entity_id, external_id, version, effect, error, at FROM calls ORDER BY seq"
        ).fetchall()
        return [Call(*row) for row in rows]

    def clear(self, *, events: bool, calls: bool, faults: bool) -> None:
        for table, chosen in (("events", events), ("calls", calls), ("faults", faults)):
            if chosen:
                self._conn.execute(f"DELETE FROM {table}")  # table names: the literals above


def _stored_event(row: tuple[Any, ...]) -> StoredEvent:
    account_id, external_id, sync_key, etag, body, status, writes = row
    return StoredEvent(account_id, external_id, sync_key, etag, json.loads(body), status, writes)


def _fault_rule(row: tuple[Any, ...]) -> MemoryFaultRule:
    fault_id, op, account_id, entity_id, title, error, message, retry_after, delay_ms, after, remaining = row
    return MemoryFaultRule(
        fault_id, op, account_id, entity_id, title, error, message, retry_after, delay_ms, bool(after), remaining
    )

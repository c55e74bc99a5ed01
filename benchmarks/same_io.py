"""The I/O of one sync job written by hand against the drivers (SQLite or PostgreSQL): the floor of the design.

What any implementation of calsync's design must do per job, without calsync's middlewares,
validation, logging, metrics or DLQ machinery: take the target's lock (one Redis command), read the
state (one statement), call the memory provider, write the result and the idempotency record (one
transaction), free the lock. ``benchmarks/pipeline.py`` runs it in process, ``benchmarks/worker.py``
as a deployed ``dramatiq`` worker (``benchmarks.same_io_app``), each beside calsync in the same run.
On SQLite one connection per process is used in turn; on PostgreSQL each thread has a connection in
autocommit mode, and the write is BEGIN, its two statements and COMMIT in one psycopg pipeline: the two
round trips per job the design needs at the least (calsync runs SQLAlchemy transactions, with more).
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import secrets
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psycopg
import redis

from calsync.core.model.calendar import Account, EventState, Target
from calsync.providers.memory import MemoryProvider

_READ = """
SELECT e.version, e.title, e.start_at, e.end_at, e.time_zone, e.all_day, e.location, e.description, e.attendees,
       e.status, e.send_updates, t.synced_version, t.external_id, t.external_etag, a.provider, a.status, i.key
FROM provider_accounts a
JOIN events e ON e.tenant_id = ? AND e.id = ?
JOIN event_targets t ON t.tenant_id = e.tenant_id AND t.event_id = e.id AND t.account_id = a.id
LEFT JOIN idempotency_records i ON i.key = ? AND i.outcome = 'success' AND i.expires_at > ?
WHERE a.id = ?
"""
_RECORD = """
UPDATE event_targets SET synced_version = ?, external_id = ?, external_etag = ?, status = 'synced', updated_at = ?
WHERE tenant_id = ? AND event_id = ? AND account_id = ? AND synced_version < ?
"""
_REMEMBER = """
INSERT INTO idempotency_records (key, job_id, outcome, result, created_at, expires_at)
VALUES (?, ?, 'success', ?, ?, ?) ON CONFLICT (key) DO NOTHING
"""
# PostgreSQL's placeholders; the idempotency record's result is a JSON column there.
_PG_READ, _PG_RECORD = _READ.replace("?", "%s"), _RECORD.replace("?", "%s")
_PG_REMEMBER = _REMEMBER.replace("?", "%s").replace("'success', %s,", "'success', %s::json,")
_UNLOCK = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"


class SameIo:
    """The job by hand: ``sync(tenant, entity, account, idempotency key, job id)``, safe across threads."""

    def __init__(self, database: Path | str, client: redis.Redis, namespace: str, provider: MemoryProvider) -> None:
        """``database``: a SQLite file, or a ``postgresql://`` connection string."""
        self._client = client
        self._namespace = namespace
        self._provider = provider
        self._unlock = client.register_script(_UNLOCK)
        self._nonce, self._serial = secrets.token_hex(12), itertools.count(1)
        self._dsn = str(database) if str(database).startswith("postgresql://") else None
        self._local = threading.local()
        self._opened: list[psycopg.Connection[Any]] = []
        if self._dsn is None:
            # As calsync does on SQLite: one connection per process, used in turn (its page cache stays warm),
            # which also queues this process' writers, since SQLite has one writer at a time.
            self._conn = sqlite3.connect(database, isolation_level=None, check_same_thread=False, timeout=30)
            for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "mmap_size=268435456"):
                self._conn.execute(f"PRAGMA {pragma}")
        self._turn = threading.Lock()

    def sync(self, tenant: str, entity: str, account_id: str, key: str, job_id: str) -> None:
        """One job: lock, read, provider, write, unlock."""
        lock_key = f"{self._namespace}:lock:{tenant}:{entity}:{account_id}"
        token = f"{self._nonce}:{next(self._serial)}"
        if not self._client.set(lock_key, token, nx=True, px=60_000):
            raise RuntimeError("lock busy")
        if self._dsn is None:
            self._sqlite_job(tenant, entity, account_id, key, job_id)
        else:
            self._postgresql_job(tenant, entity, account_id, key, job_id)
        self._unlock(keys=[lock_key], args=[token])

    def _sqlite_job(self, tenant: str, entity: str, account_id: str, key: str, job_id: str) -> None:
        now = dt.datetime.now(dt.UTC).replace(tzinfo=None).isoformat(" ")
        with self._turn:
            row = self._conn.execute(_READ, (tenant, entity, key, now, account_id)).fetchone()
        written = self._call_provider(tenant, entity, account_id, row)
        if written is not None:
            version, external_id, etag, result = written
            with self._turn:
                self._conn.execute("BEGIN IMMEDIATE")
                self._conn.execute(_RECORD, (version, external_id, etag, now, tenant, entity, account_id, version))
                self._conn.execute(_REMEMBER, (key, job_id, result, now, now))
                self._conn.execute("COMMIT")

    def _postgresql_job(self, tenant: str, entity: str, account_id: str, key: str, job_id: str) -> None:
        conn = self._thread_connection()
        now = dt.datetime.now(dt.UTC)
        row = conn.execute(_PG_READ, (tenant, entity, key, now, account_id)).fetchone()
        assert row is not None, f"no state for {tenant}/{entity}/{account_id}"
        written = self._call_provider(tenant, entity, account_id, row)
        if written is not None:
            version, external_id, etag, result = written
            with conn.pipeline():
                conn.execute("BEGIN")
                conn.execute(_PG_RECORD, (version, external_id, etag, now, tenant, entity, account_id, version))
                conn.execute(_PG_REMEMBER, (key, job_id, result, now, now))
                conn.execute("COMMIT")

    def _thread_connection(self) -> psycopg.Connection[Any]:
        conn: psycopg.Connection[Any] | None = getattr(self._local, "conn", None)
        if conn is None:
            assert self._dsn is not None
            conn = self._local.conn = psycopg.connect(self._dsn, autocommit=True)
            with self._turn:
                self._opened.append(conn)
        return conn

    def _call_provider(self, tenant: str, entity: str, account_id: str,
                       row: Sequence[Any]) -> tuple[int, str, str | None, str] | None:  # fmt: skip
        (version, title, start, end, time_zone, all_day, location, description, attendees, status, send_updates,
         synced, external_id, etag, provider_name, account_status, already_done) = row  # fmt: skip
        if already_done or synced >= version:
            return None
        attendees = json.loads(attendees) if isinstance(attendees, str) else attendees  # SQLite text, PostgreSQL JSON
        event = EventState(entity, tenant, version, title, dt.datetime.fromisoformat(start),
                           dt.datetime.fromisoformat(end), time_zone, bool(all_day), location, description,
                           tuple(attendees), status, send_updates)  # fmt: skip
        account = Account(account_id, tenant, provider_name, "bench@example.com", account_status)
        ref = self._provider.upsert(account, event, Target(entity, account_id, tenant, external_id, etag, synced))
        result = json.dumps({"effect": "create", "external_id": ref.external_id, "version": version})
        return version, ref.external_id, ref.etag, result

    def close(self) -> None:
        """Close the database connections and the provider's."""
        if self._dsn is None:
            self._conn.close()
        for conn in self._opened:
            conn.close()
        self._provider.close()

"""The seed's ``processJob``, written by hand the way a team would: the floor calsync is measured against.

No calsync code: the libraries' defaults, one database connection per thread, and the job of the
design (docs/ARCHITECTURE.md, "Life of a job", as the source article writes it)::

    if idempotency record exists: return SUCCESS_ALREADY_DONE
    lock = SET lock:<tenant>:<entity>:<account> <token> NX PX 60000; if not lock: retry later
    try:
        entity = load event + target
        if the event moved past the job's version or the target has it: return SKIP_STALE_JOB
        result = the provider's call (a row in the provider's own SQLite file, after its latency)
        one transaction: record the result (synced_version only grows) + the idempotency record
    finally: compare-and-delete release

It reads and writes calsync's own tables (the benchmark seeds them with calsync, as for the calsync
side), on SQLite (WAL, synchronous=NORMAL and a busy timeout, the pragmas calsync sets) or
PostgreSQL. The provider's file stands for the remote calendar, the same on both sides: it gets the
memory provider's pragmas (WAL, synchronous=NORMAL), not the rollback journal's fsyncs, which would
measure the disk. ``benchmarks/worker.py`` runs it as a ``dramatiq`` worker
(``benchmarks.hand_written_app``) beside bare Dramatiq and calsync in the same run;
``benchmarks/pipeline.py`` in one process, where a profiler sees it.
"""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
import threading
import time
import uuid
from typing import Any

import psycopg
import redis

_DONE = "SELECT 1 FROM idempotency_records WHERE key = ? AND outcome = 'success' AND expires_at > ?"
_LOAD = """
SELECT e.version, e.title, e.start_at, e.end_at, e.time_zone, t.synced_version, t.external_id
FROM events e JOIN event_targets t ON t.tenant_id = e.tenant_id AND t.event_id = e.id
WHERE e.tenant_id = ? AND e.id = ? AND t.account_id = ?
"""
_SAVE = """
UPDATE event_targets SET synced_version = ?, external_id = ?, status = 'synced', updated_at = ?
WHERE tenant_id = ? AND event_id = ? AND account_id = ? AND synced_version < ?
"""
_MARK = """
INSERT INTO idempotency_records (key, job_id, outcome, result, created_at, expires_at)
VALUES (?, ?, 'success', ?, ?, ?) ON CONFLICT (key) DO NOTHING
"""
_PROVIDER_TABLE = "CREATE TABLE IF NOT EXISTS items (id TEXT PRIMARY KEY, title TEXT, start_at TEXT, end_at TEXT)"
_PROVIDER_WRITE = "INSERT OR REPLACE INTO items (id, title, start_at, end_at) VALUES (?, ?, ?, ?)"
_RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"


class HandWrittenJob:
    """``run(tenant, entity, account, version, key, job_id)``: the job, safe across threads."""

    def __init__(self, database: str, client: redis.Redis, namespace: str, provider_file: str, latency: float) -> None:
        """``database``: a SQLite file path or a ``postgresql://`` URL; ``latency``: the provider's, in seconds."""
        self._database = database
        self._postgres = database.startswith("postgresql://")
        self._client = client
        self._namespace = namespace
        self._provider_file = provider_file
        self._latency = latency
        self._release = client.register_script(_RELEASE)
        self._local = threading.local()
        with sqlite3.connect(provider_file) as conn:
            conn.execute(_PROVIDER_TABLE)

    def run(self, tenant: str, entity: str, account: str, version: int, key: str, job_id: str) -> str:
        """One job; answers what happened (done, stale, success); a busy lock raises, so Dramatiq retries it."""
        db = self._db()
        now = dt.datetime.now(dt.UTC)
        done = self._query(db, _DONE, (key, now)).fetchone() is not None
        db.commit()  # end the check's transaction: an idle one would hold PostgreSQL's snapshot, SQLite's WAL
        if done:
            return "done"
        lock, token = f"{self._namespace}:lock:{tenant}:{entity}:{account}", uuid.uuid4().hex
        if not self._client.set(lock, token, nx=True, px=60_000):
            raise RuntimeError("the target is locked: retry later")
        try:
            row = self._query(db, _LOAD, (tenant, entity, account)).fetchone()
            db.commit()  # end the read's transaction
            current, title, start, end, _zone, synced, _external_id = row
            if current != version or synced >= version:
                return "stale"
            external_id = self._provider_call(f"{tenant}:{entity}:{account}", title, start, end)
            result = json.dumps({"effect": "create", "external_id": external_id, "version": version})
            expires = now + dt.timedelta(days=1)
            self._query(db, _SAVE, (version, external_id, now, tenant, entity, account, version))
            self._query(db, _MARK, (key, job_id, result, now, expires))
            db.commit()
            return "success"
        finally:
            self._release(keys=[lock], args=[token])

    def _provider_call(self, item_id: str, title: str, start: Any, end: Any) -> str:
        time.sleep(self._latency)
        conn = getattr(self._local, "provider", None)
        if conn is None:  # the calendar's stand-in, with the memory provider's pragmas: the same on both sides
            conn = self._local.provider = sqlite3.connect(self._provider_file, timeout=30)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
        with conn:
            conn.execute(_PROVIDER_WRITE, (item_id, title, str(start), str(end)))
        return item_id

    def _db(self) -> Any:
        conn = getattr(self._local, "db", None)
        if conn is None:
            if self._postgres:
                conn = psycopg.connect(self._database)
            else:
                conn = sqlite3.connect(self._database, timeout=30)
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
            self._local.db = conn
        return conn

    def _query(self, conn: Any, sql: str, params: tuple[Any, ...]) -> Any:
        if self._postgres:
            return conn.execute(sql.replace("?", "%s"), params)
        # calsync's timestamps are naive UTC text on SQLite ("YYYY-MM-DD HH:MM:SS.ffffff").
        text = tuple(p.replace(tzinfo=None).isoformat(" ") if isinstance(p, dt.datetime) else p for p in params)
        return conn.execute(sql, text)

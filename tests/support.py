"""Helpers for tests: test-scale settings, a pipeline harness with real worker threads, condition waits."""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import math
import shlex
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import dramatiq
from sqlalchemy import Connection, select

from calsync.actors.worker import build_worker
from calsync.core.clients import Clients, open_redis, resolve_broker_url, resolve_redis_url
from calsync.core.config.settings import Settings
from calsync.core.messaging.broker import connect_broker
from calsync.core.model.payload import SYNC_JOB, new_payload
from calsync.core.producer.receipts import Receipt
from calsync.core.producer.submit import Producer
from calsync.core.redis.keys import RedisKeys
from calsync.core.redis.locks import LockManager
from calsync.core.store import accounts, dead_letters, events, migrate, targets
from calsync.core.store.crypto import CredentialCipher
from calsync.core.store.database import Database
from calsync.core.store.dead_letters import DeadLetter, DeadLetterFilter, DeadLetterRecord
from calsync.core.store.schema import dead_letters as dead_letters_table
from calsync.core.store.targets import TargetKey, TargetRow, Wanted
from calsync.core.worker.heartbeat import HEARTBEAT_SUFFIX
from calsync.core.worker.job import JobParts
from calsync.providers.memory import MemoryProvider
from calsync_emulators.harness.waiting import free_port as free_port
from calsync_emulators.harness.waiting import wait_until as wait_until

TEST_SCALE: dict[str, Any] = {
    "profile": "test",  # the internal timings scaled down with the rest (docs/TESTING.md)
    "retry_schedule": (0.2, 0.4, 0.6),
    "retry_jitter": 0.1,
    "provider_timeout": 3,
    "job_time_limit": 6,
    "lock_ttl": 8,
    "lock_retry_delay": 0.05,
    "lock_max_waits": 100,  # the wait budget outlasts LOCK_TTL after the broker heartbeat (the settings check)
    "reconcile_after": 30,
    "broker_heartbeat_timeout": 5,
    "coalesce_window": 0,  # every edit enqueued at once; the coalescing tests set their window
    # The lane tests count a tenant's enqueues exactly; with 60 s fixed windows a test that crossed a window's
    # end saw the earlier enqueues weighted below one job (core/producer/fairness.py) about once in 30 runs.
    # A day's window ends only at 00:00 UTC.
    "bulk_window": 86400,
    # No drift sweeps scheduled: the workers' maintenance would sweep every account of a test that runs long enough,
    # adding read-backs to the calls and outcomes the tests count. The drift tests set their interval.
    "drift_interval": 0,
}


def make_settings(data_dir: Path, **values: Any) -> Settings:
    """Settings with test-scale timings; explicit values win."""
    return Settings(data_dir=data_dir, **{**TEST_SCALE, **values})


@contextlib.contextmanager
def logging_kept(*names: str) -> Iterator[None]:
    """Put the root logger's handlers and level, and the named loggers' levels, back afterwards
    (``configure_logging`` replaces them; the test session's own logging must survive it)."""
    root = logging.getLogger()
    handlers, root_level = list(root.handlers), root.level
    levels = {name: logging.getLogger(name).level for name in names}
    try:
        yield
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in handlers:
            root.addHandler(handler)
        root.setLevel(root_level)
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)


def python_in_a_new_process(script: str, *args: str, env: dict[str, str] | None = None) -> str:
    """Run ``script`` in a fresh interpreter (what a process starting up imports) and return its stdout."""
    done = subprocess.run([sys.executable, "-c", script, *args], env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def closed_port() -> int:
    """A local TCP port nobody listens on right now (a connection to it is refused)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def in_threads(work: Callable[[int], object], count: int, *, timeout: float | None = None) -> None:
    """Run ``work(0)`` … ``work(count - 1)`` each in a thread of its own, all at once, and wait for them."""
    threads = [threading.Thread(target=work, args=(n,)) for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)


def change(
    accounts_: list[str] | None,
    *,
    title: str = "Planning",
    entity_id: str | None = None,
    operation: str = "upsert",
    start: str = "2026-12-01T09:00:00",
    end: str = "2026-12-01T10:00:00",
    **event: Any,
) -> dict[str, Any]:
    """A change document as a producer would send it."""
    doc: dict[str, Any] = {"operation": operation}
    if entity_id is not None:
        doc["entity_id"] = entity_id
    if accounts_ is not None:
        doc["accounts"] = accounts_
    if operation == "upsert":
        doc["event"] = {"title": title, "start": start, "end": end, "time_zone": "Europe/Berlin", **event}
    return doc


class Pipeline:
    """A worker (its composition root's parts) with the memory provider, plus shortcuts to drive and inspect it."""

    def __init__(self, settings: Settings, provider: MemoryProvider | None = None) -> None:
        self.settings = settings
        self.provider = provider or MemoryProvider()
        bootstrap = Database(settings.effective_database_url)
        migrate.migrate_to(bootstrap)
        bootstrap.dispose()
        self.app = build_worker(settings, providers={"memory": self.provider})
        self.clients = self.app.clients
        self.broker = self.app.clients.broker
        self.actors = self.app.actors
        self.broker.emit_after("process_boot")
        self.producer = Producer(self.clients)
        self._worker: dramatiq.Worker | None = None

    @contextlib.contextmanager
    def worker(self, threads: int = 4) -> Iterator[dramatiq.Worker]:
        """Real Dramatiq worker threads consuming the real broker while the block runs."""
        worker = dramatiq.Worker(self.broker, worker_threads=threads, worker_timeout=50)
        worker.start()
        try:
            yield worker
        finally:
            worker.stop(timeout=10_000)

    def job_parts(self, broker: dramatiq.Broker, *, locks: LockManager | None = None) -> JobParts:
        """What the sync job uses in this pipeline, with repairs enqueued on ``broker`` (and ``locks``: other
        locks than the worker's)."""
        rt = self.clients
        return JobParts(db=rt.db, cipher=rt.cipher, locks=locks or self.app.locks, keys=rt.keys, broker=broker,
                        providers=self.app.providers, queue=self.settings.queue, idempotency_ttl=60)  # fmt: skip

    def close(self) -> None:
        """Release the worker's parts."""
        self.app.close()

    # --- driving ------------------------------------------------------------------------------

    def account(self, tenant: str = "tenant-1", account_id: str | None = None) -> str:
        """Register a memory account."""
        with self.clients.db.write() as conn:
            return accounts.add_account(
                conn,
                tenant_id=tenant,
                provider="memory",
                address=f"{account_id or 'cal'}@example.com",
                credentials=None,
                options={},
                account_id=account_id,
            ).id

    def submit(self, accounts_: list[str] | None, tenant: str = "tenant-1", **kw: Any) -> Receipt:
        """Submit a change through the producer."""
        return self.producer.submit(tenant, change(accounts_, **kw))

    # --- inspecting ---------------------------------------------------------------------------

    def target(self, entity_id: str, account_id: str, tenant: str = "tenant-1") -> TargetRow:
        """One target's row."""
        with self.clients.db.read() as conn:
            row = targets.get_target(conn, TargetKey(tenant, entity_id, account_id))
        assert row is not None
        return row

    def event_version(self, entity_id: str, tenant: str = "tenant-1") -> int:
        """The event's current version."""
        with self.clients.db.read() as conn:
            state = events.get_event(conn, tenant, entity_id)
        assert state is not None
        return state.version

    def dead_letters(self, **flt: Any) -> list[DeadLetter]:
        """Open DLQ records (filters as DeadLetterFilter fields)."""
        with self.clients.db.read() as conn:
            return dead_letters.find(conn, DeadLetterFilter(**flt))

    def outcomes(self) -> dict[str, int]:
        """Job outcomes counted by the workers in the last hour."""
        self.app.stats.flush()  # this process's workers batch their counts
        return dict(self.app.stats.totals(minutes=60))

    def wait_target(self, entity_id: str, account_id: str, status: str, *, timeout: float = 30) -> TargetRow:
        """Wait until a target reaches ``status`` and return it."""

        def reached() -> TargetRow | None:
            row = self.target(entity_id, account_id)
            return row if row.status == status else None

        found = wait_until(reached, timeout=timeout, what=f"target {entity_id}/{account_id} to be {status}")
        assert found is not None
        return found

    def wait_idle(self, *, timeout: float = 30) -> None:
        """Wait until no target is pending."""

        def idle() -> bool:
            with self.clients.db.read() as conn:
                return targets.count_by_status(conn).get("pending", 0) == 0

        wait_until(idle, timeout=timeout, what="every target to leave pending")


def utcnow() -> dt.datetime:
    """Aware now."""
    return dt.datetime.now(dt.UTC)


def plan_target(conn: Connection, key: TargetKey, *, wanted: Wanted, version: int, due_at: dt.datetime) -> None:
    """Plan one target the way ``submit`` plans many (:func:`targets.plan_targets`), whether it exists or not."""
    existing = {key} if targets.get_target(conn, key) is not None else set()
    targets.plan_targets(conn, [(key, wanted)], version=version, due_at=due_at, existing=existing)


def dead_letter_of_job(conn: Connection, job_id: str) -> DeadLetter | None:
    """The dead-letter record of a job, whatever its status."""
    row = conn.execute(select(dead_letters_table).where(dead_letters_table.c.job_id == job_id)).mappings().first()
    return None if row is None else DeadLetter(**row)


def stored_dead_letter(
    pipeline: Pipeline, tenant: str, account: str, entity: str, *, reason: str = "forbidden", error: str = "refused"
) -> int:
    """Submit a change of ``entity`` to ``account`` and store a dead letter of its job (as if it failed); its id."""
    receipt = pipeline.submit([account], tenant=tenant, entity_id=entity)
    key = f"calendar:{tenant}:{entity}:{account}:create"
    payload = new_payload(tenant_id=tenant, entity_id=receipt.entity_id, account_id=account, operation="create",
                          version=1, trace_id="trace-dlq", key=key)  # fmt: skip
    now = dt.datetime.now(dt.UTC)
    record = DeadLetterRecord(
        job_id=payload.job_id, job_type=SYNC_JOB, message_id=None, queue="calendar", tenant_id=tenant,
        entity_id=entity, account_id=account, idempotency_key=payload.idempotency_key, trace_id="trace-dlq",
        payload=payload.model_dump(mode="json"), attempts=1, reason=reason, error_class="Forbidden",
        last_error=error, error_history=[], first_failed_at=now, failed_at=now,
    )  # fmt: skip
    with pipeline.clients.db.write() as conn:
        dead_letters.insert(pipeline.clients.db, conn, record)
        stored = dead_letter_of_job(conn, payload.job_id)
    assert stored is not None
    return stored.id


def probe_script(directory: Path, max_age: float) -> str:
    """The worker's liveness probe (k8s/base/worker.yaml, docker-compose.yml, docs/METRICS.md): shell (POSIX sh +
    coreutils/busybox) that fails unless every heartbeat file is younger than ``max_age``.

    No file at all also fails: the workers have not booted (cover start-up with a startupProbe).
    """
    pattern = shlex.quote(str(directory)) + "/*" + HEARTBEAT_SUFFIX
    limit = math.ceil(max_age)
    return (
        f'now=$(date +%s); n=0; for f in {pattern}; do [ -e "$f" ] || continue; n=$((n+1)); '
        f'[ $((now - $(stat -c %Y "$f" 2>/dev/null || echo "$now"))) -lt {limit} ] || exit 1; done; [ "$n" -gt 0 ]'
    )


def probe_command(directory: Path, max_age: float) -> list[str]:
    """The exec liveness probe's command, as a Kubernetes ``exec.command`` list."""
    return ["sh", "-c", probe_script(directory, max_age)]


def unchecked_clients(settings: Settings) -> Clients:
    """The clients ``connect`` builds, without its schema check: for a database that is down or not migrated."""
    broker_url = resolve_broker_url(settings)
    redis_url = resolve_redis_url(settings, broker_url)
    db = Database(settings.effective_database_url)
    broker = connect_broker(broker_url, settings)
    keys, cipher = RedisKeys(settings.redis_namespace), CredentialCipher(settings.cipher_keys)
    return Clients(settings, broker_url, redis_url, db, open_redis(redis_url), keys, cipher, broker)

"""What every benchmark shares: its own Redis (never a shared server by accident), its own keys, removed after.

A benchmark talks to the embedded ``redis-server`` it starts in its scratch directory, unless it is
given ``--redis-url`` explicitly; either way everything it writes lives under a ``bench-…``
namespace that :func:`remove_keys` deletes when the side is done.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import dramatiq
import psutil

from calsync.core.model.calendar import ProviderName
from calsync.core.model.change import EventFields
from calsync.core.model.payload import JobPayload, new_payload
from calsync.core.redis.embedded import EmbeddedRedis
from calsync.core.store import accounts, events, targets
from calsync.core.store.database import Database
from calsync.core.store.targets import TargetKey, Wanted
from calsync_emulators.harness import scratch
from calsync_emulators.harness.scratch import remove_keys as remove_keys
from calsync_emulators.harness.signals import cleanup_on_signals
from calsync_emulators.harness.waiting import free_port as free_port
from calsync_emulators.harness.workers import start_worker as start_worker
from calsync_emulators.harness.workers import stop_group as stop_group

if TYPE_CHECKING:
    from calsync.actors.worker import WorkerProcess
    from calsync.core.clients import Clients
    from calsync.core.config.settings import Settings


def add_redis_option(parser: argparse.ArgumentParser) -> None:
    """The ``--redis-url`` option: a server to use explicitly (default: an embedded one in the scratch dir)."""
    parser.add_argument("--redis-url", help="use this Redis (default: an embedded redis-server of its own)")


@contextlib.contextmanager
def bench_redis(explicit: str | None, scratch: Path) -> Iterator[str]:
    """The URL of the Redis this run uses: the explicit one, or an embedded server stopped at the end.

    While it is open, SIGTERM and SIGHUP (``timeout``, a closed terminal, ``kill``) end the run with exit
    status 128 + the signal, as Ctrl-C does, so every cleanup still runs: the workers' process groups are
    stopped, the keys removed, the embedded server stopped. By default either signal ends Python without
    running them.
    """
    with cleanup_on_signals():
        if explicit is not None:
            yield explicit
            return
        embedded = EmbeddedRedis(scratch)
        try:
            yield embedded.ensure()
        finally:
            embedded.stop()


def namespace(side: str) -> str:
    """A fresh key namespace for one side of one round."""
    return scratch.namespace(f"bench-{side}")


@contextlib.contextmanager
def private_database(kind: str, dsn: str, scratch_dir: Path) -> Iterator[str]:
    """A database URL private to one side: a SQLite file, or a fresh PostgreSQL schema dropped afterwards."""
    if kind == "sqlite":
        yield f"sqlite:///{scratch_dir / 'calsync.sqlite3'}"
        return
    with scratch.private_schema(dsn, "bench") as url:
        yield url


def seed(db: Database, jobs: int, provider: ProviderName = "memory", *, address: str = "bench@example.com",
         credentials: bytes | None = None, options: Mapping[str, Any] | None = None) -> list[JobPayload]:  # fmt: skip
    """One account (of ``provider``, credentials already encrypted) and ``jobs`` new events with pending targets."""
    start = dt.datetime(2026, 12, 1, 9, tzinfo=dt.UTC)
    fields = EventFields(title="Benchmark", start=start, end=start + dt.timedelta(hours=1))
    tenant = f"bench-{uuid.uuid4().hex[:8]}"  # rounds may share one database (--database-url)
    with db.write() as conn:
        account = accounts.add_account(conn, tenant_id=tenant, provider=provider, address=address,
                                       credentials=credentials, options=dict(options or {})).id  # fmt: skip
    payloads = []
    planned: list[tuple[TargetKey, Wanted]] = []
    with db.write() as conn:
        for n in range(jobs):
            entity = f"evt{n}"
            events.insert_event(conn, tenant, entity, fields, "none")
            planned.append((TargetKey(tenant, entity, account), "present"))
            payloads.append(new_payload(tenant_id=tenant, entity_id=entity, account_id=account, operation="create",
                                        version=1, trace_id="bench"))  # fmt: skip
        targets.plan_targets(conn, planned, version=1, due_at=dt.datetime.now(dt.UTC), existing=())
    return payloads


def tree_cpu(root: psutil.Process) -> float:
    """CPU seconds (user + system) of ``root`` and its live descendants so far."""
    total = 0.0
    for proc in [root, *root.children(recursive=True)]:
        try:
            times = proc.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system
    return total


def finished_jobs(broker: dramatiq.Broker) -> Callable[[], int]:
    """A counter of the deliveries ``broker``'s workers have acked or nacked: an in-process drain's progress."""

    class _Finished(dramatiq.Middleware):
        def __init__(self) -> None:
            self.done = 0
            self.lock = threading.Lock()

        def after_ack(self, _broker: dramatiq.Broker, _message: dramatiq.MessageProxy) -> None:
            with self.lock:
                self.done += 1

        def after_nack(self, broker: dramatiq.Broker, message: dramatiq.MessageProxy) -> None:
            self.after_ack(broker, message)

    finished = _Finished()
    broker.add_middleware(finished)
    return lambda: finished.done


def in_process_worker(scratch: Path, url: str, ns: str, **values: Any) -> WorkerProcess:
    """A worker's parts in this process, booted: its own SQLite file (migrated), Redis namespace, a fresh secret key.

    ``values`` are settings (an emulator's endpoint, overrides); logs at ERROR. Close it with ``close()``.
    """
    from cryptography.fernet import Fernet

    from calsync.actors.worker import build_worker
    from calsync.core.config.settings import Settings
    from calsync.core.store import migrate

    settings = Settings(data_dir=scratch, broker_url=url, database_url=f"sqlite:///{scratch / 'calsync.sqlite3'}",
                        redis_namespace=ns, log_level="ERROR", secret_key=Fernet.generate_key().decode(),
                        **values)  # fmt: skip
    bootstrap = Database(settings.effective_database_url)
    migrate.migrate_to(bootstrap)
    bootstrap.dispose()
    app = build_worker(settings)
    try:
        app.clients.broker.emit_after("process_boot")
    except BaseException:
        app.close()
        raise
    return app


@contextlib.contextmanager
def traced_round_trips(engine: Any, directory: Path) -> Iterator[Callable[[], int]]:
    """Count the PostgreSQL round trips of every connection ``engine`` opens from here on; yields the counter.

    libpq's protocol trace of each connection goes to a file in ``directory``: each round trip ends with the
    server's ReadyForQuery message (after a Sync or a simple Query). Connections already pooled are disposed
    first, so only new ones are traced. Read the counter after the block: leaving it closes the pooled
    connections, and a connection's trace is complete (flushed) once it is closed.
    """
    from psycopg import pq
    from sqlalchemy import event

    directory.mkdir(parents=True, exist_ok=True)
    engine.dispose()
    traces: list[Path] = []
    handles: list[Any] = []

    def trace(dbapi_connection: Any, _record: Any) -> None:
        path = directory / f"trace-{len(traces)}.txt"
        traces.append(path)
        handles.append(open(path, "w"))  # noqa: SIM115 (closed on exit)
        dbapi_connection.pgconn.trace(handles[-1].fileno())
        dbapi_connection.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS)

    def untrace(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.pgconn.untrace()  # flushes the connection's trace

    event.listen(engine, "connect", trace)
    event.listen(engine, "close", untrace)
    try:
        yield lambda: sum(path.read_text().count("\tReadyForQuery\t") for path in traces)
    finally:
        engine.dispose()
        event.remove(engine, "connect", trace)
        event.remove(engine, "close", untrace)
        for handle in handles:
            handle.close()


def migrated_clients(settings: Settings) -> Clients:
    """A producer's clients (``calsync.connect``) on a database migrated to the head first."""
    from calsync.core.clients import connect
    from calsync.core.store import migrate

    bootstrap = Database(settings.effective_database_url)
    try:
        migrate.migrate_to(bootstrap)
    finally:
        bootstrap.dispose()
    return connect(settings)


@contextlib.contextmanager
def postgresql_clients(
    side: str, dsn: str, redis_url: str | None, scratch_dir: Path, **values: Any
) -> Iterator[Clients]:
    """Clients on a fresh PostgreSQL schema of ``dsn`` (migrated) and a Redis namespace of their own, on the Redis
    :func:`bench_redis` gives; ``values`` are settings. The schema, the keys and an embedded Redis go at the end."""
    from calsync.core.config.settings import Settings

    with contextlib.ExitStack() as stack:
        url = stack.enter_context(bench_redis(redis_url, scratch_dir))
        database_url = stack.enter_context(private_database("postgresql", dsn, scratch_dir))
        ns = namespace(side)
        stack.callback(remove_keys, url, ns)
        settings = Settings(data_dir=scratch_dir, broker_url=url, redis_namespace=ns, log_level="WARNING",
                            database_url=database_url, **values)  # fmt: skip
        clients = migrated_clients(settings)
        stack.callback(clients.close)
        yield clients

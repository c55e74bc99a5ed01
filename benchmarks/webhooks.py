"""Webhooks: what they cost the calendar queue, and how fast notifications reach a receiver, in one run.

    PYTHONPATH=. .venv/bin/python benchmarks/webhooks.py [--jobs 3000] [--notifications 2000] [--threads 8]
        [--rounds 3] [--database-url URL] [--redis-url URL]

Sync path: the full calsync pipeline (every middleware, the database, the lock, the memory provider),
one process x ``--threads`` worker threads consuming the calendar queue only, for a tenant without
webhooks ("off") and for a tenant with an enabled ``sync.succeeded`` endpoint ("on": one outbox row in
the result's transaction and one ``dispatch_webhook`` enqueue after the commit per job; the webhook
queue is left to its own consumers, as in a deployment that scales them apart). The sides alternate
for ``--rounds`` rounds; it prints each, the median jobs/s and the median on/off ratio (the target is
>= 0.90: webhooks cost the sync path at most 10 %).
Deliveries: ``--notifications`` dispatched notifications, one endpoint on a local receiver (a separate
process answering 204), delivered by one process x ``--threads`` threads consuming the webhook queue
only: signed, SSRF-checked, recorded. It prints notifications/s.
Everything lives in its own Redis (embedded unless ``--redis-url``) under ``bench-…`` namespaces,
removed after each side. It is a benchmark, not a test: numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import dramatiq
from sqlalchemy import func, select

from benchmarks.support import add_redis_option, bench_redis, finished_jobs, namespace, remove_keys, seed
from calsync.actors.worker import WorkerProcess, build_worker
from calsync.core.config.settings import Settings
from calsync.core.messaging.messages import sync_message, webhook_delivery_message
from calsync.core.store import migrate
from calsync.core.store.crypto import generate_key
from calsync.core.store.database import Database
from calsync.core.store.schema import webhook_notifications
from calsync.core.webhooks import store
from calsync.core.webhooks.model import notification
from calsync.providers.memory import MemoryProvider

RECEIVER = """
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", "0")))
        self.send_response(204); self.send_header("content-length", "0"); self.end_headers()
    def log_message(self, *a): pass
s = ThreadingHTTPServer(("127.0.0.1", 0), H); s.daemon_threads = True
print(s.server_address[1], flush=True); s.serve_forever()
"""


def _settings(url: str, scratch: Path, database_url: str | None, threads: int) -> Settings:
    return Settings(
        data_dir=scratch, broker_url=url, database_url=database_url or f"sqlite:///{scratch / 'bench.sqlite3'}",
        redis_namespace=namespace("webhooks"), worker_threads=threads, log_level="WARNING",
        secret_key=generate_key(), webhook_allow_http=True, webhook_allowed_networks="127.0.0.0/8",
    )  # fmt: skip


@dataclass(frozen=True)
class Side:
    """One side's result: items per second, and this process' CPU per item (steadier on a busy machine)."""

    rate: float
    cpu_ms: float


def _worker(settings: Settings) -> WorkerProcess:
    """A migrated database and a worker with the memory provider, its broker booted."""
    bootstrap = Database(settings.effective_database_url)
    migrate.migrate_to(bootstrap)
    bootstrap.dispose()
    app = build_worker(settings, providers={"memory": MemoryProvider()})
    app.clients.broker.emit_after("process_boot")
    return app


def _timed(broker: dramatiq.Broker, queue: str, threads: int, items: int, finished: Callable[[], bool]) -> Side:
    worker = dramatiq.Worker(broker, queues={queue}, worker_threads=threads, worker_timeout=100)
    started, cpu = time.perf_counter(), time.process_time()
    worker.start()
    while not finished():
        time.sleep(0.005)
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    worker.stop()
    return Side(items / elapsed, cpu / items * 1000)


def sync_path(url: str, scratch: Path, database_url: str | None, jobs: int, threads: int, *, webhooks: bool) -> Side:
    """Calendar jobs/s, with or without an endpoint for the tenant."""
    settings = _settings(url, scratch, database_url, threads)
    app = _worker(settings)
    clients = app.clients
    broker = clients.broker
    payloads = seed(clients.db, jobs)
    if webhooks:
        with clients.db.write() as conn:
            store.create_endpoint(conn, clients.cipher, tenant_id=payloads[0].tenant_id,
                                  url="http://127.0.0.1:9/unused", events=["sync.succeeded"])  # fmt: skip
    for payload in payloads:
        broker.enqueue(sync_message(settings.queue, payload))
    finished = finished_jobs(broker)
    try:
        measured = _timed(broker, settings.queue, threads, jobs, lambda: finished() >= jobs)
        if webhooks:
            with clients.db.read() as conn:
                recorded = select(func.count()).where(webhook_notifications.c.tenant_id == payloads[0].tenant_id)
                assert conn.execute(recorded).scalar_one() == jobs
        return measured
    finally:
        app.close()
        remove_keys(url, settings.redis_namespace)


def deliveries(url: str, scratch: Path, database_url: str | None, count: int, threads: int) -> Side:
    """Notifications/s delivered to a local receiver by the webhook queue's workers."""
    receiver = subprocess.Popen([sys.executable, "-c", RECEIVER], stdout=subprocess.PIPE, text=True)
    assert receiver.stdout is not None
    port = int(receiver.stdout.readline())
    settings = _settings(url, scratch, database_url, threads)
    app = _worker(settings)
    clients = app.clients
    broker = clients.broker
    try:
        with clients.db.write() as conn:
            receiver_url = f"http://127.0.0.1:{port}/hooks"
            _, endpoint = store.create_endpoint(conn, clients.cipher, tenant_id="bench", url=receiver_url,
                                                events=["sync.succeeded"])  # fmt: skip
            ids = []
            for n in range(count):
                data = {"tenant_id": "bench", "entity_id": f"evt{n}", "version": 1, "status": "synced"}
                notification_id, doc = notification("sync.succeeded", data, key=[n])
                store.record_notification(conn, notification_id, "bench", "sync.succeeded", doc)
                store.create_deliveries(conn, notification_id, [endpoint.id])
                ids.append(notification_id)
        for notification_id in ids:
            broker.enqueue(webhook_delivery_message(settings.webhook_queue, notification_id, endpoint.id))

        def delivered() -> bool:
            with clients.db.read() as conn:
                return store.count_deliveries(conn).get("delivered", 0) >= count

        return _timed(broker, settings.webhook_queue, threads, count, delivered)
    finally:
        app.close()
        remove_keys(url, settings.redis_namespace)
        receiver.terminate()
        receiver.wait(timeout=10)


def main() -> None:
    """Run the sides, alternating, and print the comparison."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=3000)
    parser.add_argument("--notifications", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--database-url", help="default: a fresh SQLite file per side")
    add_redis_option(parser)
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    off: list[Side] = []
    on: list[Side] = []
    delivered: list[Side] = []
    with tempfile.TemporaryDirectory(prefix="calsync-bench-") as tmp, bench_redis(args.redis_url, Path(tmp)) as url:
        print(f"{args.jobs} sync jobs / {args.notifications} notifications, 1 process x {args.threads} threads")
        for n in range(1, args.rounds + 1):
            sides: dict[str, Side] = {}
            for name in ("off", "on", "deliver"):
                side = Path(tmp) / f"round-{n}-{name}"
                side.mkdir()
                if name == "deliver":
                    sides[name] = deliveries(url, side, args.database_url, args.notifications, args.threads)
                else:
                    sides[name] = sync_path(url, side, args.database_url, args.jobs, args.threads,
                                            webhooks=name == "on")  # fmt: skip
            off.append(sides["off"])
            on.append(sides["on"])
            delivered.append(sides["deliver"])
            a, b, d = sides["off"], sides["on"], sides["deliver"]
            print(f"round {n}: sync without webhooks {a.rate:6.0f} jobs/s ({a.cpu_ms:.2f} ms CPU/job), with"
                  f" {b.rate:6.0f} jobs/s ({b.cpu_ms:.2f} ms CPU/job), on/off {b.rate / a.rate:.2f};"
                  f" delivered {d.rate:5.0f} notifications/s ({d.cpu_ms:.2f} ms CPU each)", flush=True)  # fmt: skip
    ratios = [b.rate / a.rate for a, b in zip(off, on, strict=True)]
    cpu = [b.cpu_ms / a.cpu_ms for a, b in zip(off, on, strict=True)]
    print(f"median of {args.rounds} rounds:")
    print(f"  sync path without webhooks {statistics.median(s.rate for s in off):8.0f} jobs/s")
    print(f"  sync path with webhooks    {statistics.median(s.rate for s in on):8.0f} jobs/s")
    print(f"  on/off: {statistics.median(ratios):.2f} -- the target is >= 0.90"
          f" (rounds: {', '.join(f'{x:.2f}' for x in ratios)})")  # fmt: skip
    print(f"  CPU per job on/off: {statistics.median(cpu):.2f} (rounds: {', '.join(f'{x:.2f}' for x in cpu)})")
    print(f"  deliveries                 {statistics.median(s.rate for s in delivered):8.0f} notifications/s")


if __name__ == "__main__":
    main()

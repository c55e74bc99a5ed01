"""Throughput of the HTTP intake (``POST /v1/changes``) against in-process ``submit_change``, in one run.

    .venv/bin/python benchmarks/intake.py [--requests 2000] [--threads 8] [--database-url URL] [--redis-url URL]

One process, the same database and Redis for both sides: a live uvicorn server in a thread, and ``--threads``
client threads (http.client, keep-alive) posting new events with an API key; then the same number of threads
calling the intake directly. Every change creates an event with one target and enqueues one job (no worker
runs; the jobs stay queued and are deleted with the namespace). The clients share the server's process and
GIL, as a sidecar or load test on one node would not, so the HTTP side is measured conservatively. Prints
requests/s and p50/p99 latency per side and the ratio (the target is >= 0.5). Its own Redis namespace (an
embedded redis-server unless --redis-url) and, by default, its own SQLite file; everything is removed at the end.
It is a benchmark, not a test: numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import http.client
import json
import logging
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import uvicorn

from benchmarks.support import add_redis_option, bench_redis, namespace, remove_keys
from calsync.core.api.app import create_app
from calsync.core.api.server import listening_socket
from calsync.core.api.services import services_from_clients
from calsync.core.clients import Clients, connect
from calsync.core.config.settings import Settings
from calsync.core.store import accounts, api_keys, migrate
from calsync.core.store.database import Database


@dataclass
class Side:
    """One side's result."""

    name: str
    latencies: list[float]
    seconds: float
    cpu_seconds: float  # of this whole process (server, clients) while the side ran

    @property
    def rate(self) -> float:
        """Requests per second."""
        return len(self.latencies) / self.seconds

    def percentile(self, q: int) -> float:
        """Latency percentile in milliseconds."""
        return statistics.quantiles(self.latencies, n=100, method="inclusive")[q - 1] * 1000

    def line(self) -> str:
        """One printed line."""
        return (f"{self.name:<12} {len(self.latencies):>6} requests  {self.rate:8.1f}/s  "
                f"p50 {self.percentile(50):7.2f} ms  p99 {self.percentile(99):7.2f} ms  "
                f"cpu {self.cpu_seconds / len(self.latencies) * 1000:5.2f} ms/request")  # fmt: skip


def _change(account: str, n: int) -> dict[str, object]:
    return {"operation": "upsert", "accounts": [account],
            "event": {"title": f"Benchmark {n}", "start": "2026-12-03T15:00:00", "end": "2026-12-03T16:00:00",
                      "time_zone": "Europe/Berlin"}}  # fmt: skip


def _discard(_receipt: object) -> None:
    return None


def _run(name: str, requests: int, threads: int, make_call: Callable[[], Callable[[int], None]]) -> Side:
    """``threads`` threads, each with its own ``make_call()``, sending ``requests`` in all; timed together."""
    latencies: list[float] = []
    lock = threading.Lock()
    per_thread = requests // threads
    ready = threading.Barrier(threads + 1)

    def client(index: int) -> None:
        call = make_call()
        mine = []
        ready.wait()
        for n in range(per_thread):
            began = time.perf_counter()
            call(index * per_thread + n)
            mine.append(time.perf_counter() - began)
        with lock:
            latencies.extend(mine)

    workers = [threading.Thread(target=client, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    ready.wait()
    began, cpu = time.perf_counter(), time.process_time()
    for worker in workers:
        worker.join()
    return Side(name, latencies, time.perf_counter() - began, time.process_time() - cpu)


class _HttpClient:
    """A keep-alive connection of the standard library (lighter than httpx: the clients share the server's CPU)."""

    def __init__(self, url: str, key: str, account: str) -> None:
        parts = urlsplit(url)
        self._connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=60)
        self._headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
        self._account = account

    def call(self, n: int) -> None:
        self._connection.request("POST", "/v1/changes", json.dumps(_change(self._account, n)), self._headers)
        answer = self._connection.getresponse()
        body = answer.read()
        if answer.status != 202:
            raise RuntimeError(f"unexpected answer {answer.status}: {body!r}")


def _serve(clients: Clients) -> tuple[uvicorn.Server, threading.Thread, str]:
    sock = listening_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(services_from_clients(clients)), log_config=None,
                                           access_log=False))  # fmt: skip
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    return server, thread, f"http://127.0.0.1:{port}"


def main() -> None:
    """Parse arguments, run both sides once, print the comparison."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--database-url", help="default: a fresh SQLite file")
    add_redis_option(parser)
    args = parser.parse_args()
    logging.disable(logging.INFO)  # one "change accepted" line per request would dominate both sides

    with (
        tempfile.TemporaryDirectory(prefix="calsync-intake-bench-") as scratch_dir,
        bench_redis(args.redis_url, Path(scratch_dir)) as redis_url,
    ):
        scratch = Path(scratch_dir)
        ns = namespace("intake")
        database_url = args.database_url or f"sqlite:///{scratch / 'calsync.sqlite3'}"
        settings = Settings(data_dir=scratch, broker_url=redis_url, redis_url=redis_url, database_url=database_url,
                            redis_namespace=ns)  # fmt: skip
        bootstrap = Database(database_url)
        migrate.migrate_to(bootstrap)
        bootstrap.dispose()
        clients = connect(settings)
        tenant = f"bench-{ns}"
        try:
            with clients.db.write() as conn:
                account = accounts.add_account(conn, tenant_id=tenant, provider="memory", address="b@example.com",
                                               credentials=None, options={}).id  # fmt: skip
                key, _record = api_keys.create(conn, tenant_id=tenant, scope="submit", name="benchmark")
            server, thread, url = _serve(clients)
            services = services_from_clients(clients)
            try:

                def over_http() -> Callable[[int], None]:
                    return _HttpClient(url, key, account).call

                def in_process() -> Callable[[int], None]:
                    return lambda n: _discard(services.intake.submit(tenant, _change(account, n)))

                _run("warm-up", args.threads * 10, args.threads, over_http)
                _run("warm-up", args.threads * 10, args.threads, in_process)
                http = _run("http", args.requests, args.threads, over_http)
                direct = _run("in-process", args.requests, args.threads, in_process)
            finally:
                server.should_exit = True
                thread.join(timeout=10)
            print(f"{args.requests} changes, {args.threads} client threads, database {clients.db.dialect}")
            print(http.line())
            print(direct.line())
            print(f"ratio http / in-process: {http.rate / direct.rate:.2f} (target >= 0.5)")
        finally:
            remove_keys(redis_url, ns)
            if args.database_url:
                _delete_tenant(clients, tenant)
            clients.close()


def _delete_tenant(clients: Clients, tenant: str) -> None:
    from sqlalchemy import delete

    from calsync.core.store.schema import api_keys as keys_table
    from calsync.core.store.schema import event_targets, events, intake_requests, provider_accounts

    with clients.db.write() as conn:
        for table in (event_targets, events, intake_requests, keys_table, provider_accounts):
            conn.execute(delete(table).where(table.c.tenant_id == tenant))


if __name__ == "__main__":
    main()

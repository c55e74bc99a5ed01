"""Drain rate of ``calsync worker`` against the seed's job written by hand and bare ``dramatiq``, in one run.

    PYTHONPATH=. .venv/bin/python benchmarks/worker.py [--jobs 5000] [--rounds 3] [--shapes 1x8,2x8]
        [--database sqlite|postgresql|sqlite,postgresql] [--latency-ms 0] [--pods 1] [--redis-url URL]

Three sides. ``calsync worker`` as users run it (Dramatiq's CLI under it, metrics in Prometheus
multiprocess files, heartbeats, JSON logs at INFO written to a file, the memory provider in its data
dir's SQLite file). The hand-written job: ``dramatiq benchmarks.hand_written_app:broker``, the seed's
``processJob`` written the way a team would, with no calsync code (benchmarks/hand_written.py), on
each database the calsync side runs on: the floor calsync is measured against, and the goal is
calsync >= 0.8 of it. Bare: ``dramatiq benchmarks.noop_app:broker``, a no-op actor with Dramatiq's
default middleware. ``--latency-ms`` makes every provider write take that long on both job sides (a
delay-only fault rule on the memory provider, a sleep before the hand-written job's provider row).
All sides use the same Redis (an embedded server of the benchmark's own unless ``--redis-url`` is
given) in a namespace of their own, deleted afterwards.
The jobs are queued before the workers start, and the drain rate is measured while the queue goes
from 90 % to 10 % of them, so start-up and the tail do not count. The sides alternate, for every
shape (processes x threads) and round; it prints each side, then the medians, each side over bare
and calsync over the hand-written job per database. CPU ms/job is the worker processes' CPU over the
measured window; Redis commands/job are the workers' commands over it (the server's INFO, the
benchmark's own polls left out).
With ``--database postgresql`` the job sides run on fresh schemas of ``--postgres-dsn`` (dropped
afterwards), and it also prints the database round trips per calsync job, counted in libpq's
protocol trace of an in-process worker's connections. ``--compare PATH`` also runs the worker of
another checkout (before/after). It is a benchmark, not a test: numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dramatiq
import psutil
import redis
from dramatiq.brokers.redis import RedisBroker
from sqlalchemy.engine import make_url

from benchmarks.drain import POLL_SECONDS, QUEUE, ROOT, Drain, Shape, drain, running
from benchmarks.support import (
    add_redis_option,
    bench_redis,
    free_port,
    migrated_clients,
    namespace,
    private_database,
    remove_keys,
    seed,
    traced_round_trips,
)
from calsync.actors.worker import build_worker
from calsync.core.config.settings import ENV_PREFIX, Settings, child_environment
from calsync.core.messaging.messages import sync_message
from calsync.core.model.calendar import ProviderName
from calsync.core.store.crypto import generate_key
from calsync.providers.memory import MemoryProvider


@dataclass(frozen=True)
class Adapter:
    """The adapter a calsync side syncs through (the memory provider by default) and the account it writes to."""

    provider: ProviderName = "memory"
    settings: Mapping[str, Any] = field(default_factory=dict)  # e.g. the emulator's endpoint
    address: str = "bench@example.com"
    credentials: Mapping[str, Any] | None = None  # encrypted with a fresh secret key when given
    options: Mapping[str, Any] = field(default_factory=dict)
    emulator: psutil.Process | None = None  # where the provider's CPU goes, measured apart
    served: Callable[[], tuple[int, int]] | None = None  # the emulator's request counts (all, not 2xx)


def bare(url: str, jobs: int, shape: Shape, scratch: Path) -> Drain:
    """``dramatiq`` worker processes running a no-op actor with Dramatiq's default middleware."""
    ns = namespace("bare")
    broker = RedisBroker(url=url, namespace=ns)
    actor = dramatiq.actor(broker=broker, actor_name="noop", queue_name=QUEUE, max_retries=0)(lambda: None)
    for _ in range(jobs):
        actor.send()
    env = {**os.environ, "BENCH_REDIS_URL": url, "BENCH_NAMESPACE": ns}
    command = [sys.executable, "-m", "dramatiq", "benchmarks.noop_app:broker", "--processes", str(shape.processes),
               "--threads", str(shape.threads), "--queues", QUEUE]  # fmt: skip
    client = redis.Redis.from_url(url)
    try:
        with running(command, env, scratch / f"bare-{ns}.log") as worker:
            return drain("bare dramatiq no-op", client, ns, jobs, worker)
    finally:
        broker.close()
        client.close()
        remove_keys(url, ns)


def hand(url: str, jobs: int, shape: Shape, scratch: Path, database: str = "sqlite", dsn: str = "",
         latency_ms: int = 0) -> Drain:  # fmt: skip
    """``dramatiq`` worker processes running the seed's job written by hand (benchmarks/hand_written.py).

    On ``database`` (SQLite, or a fresh PostgreSQL schema of ``dsn``) seeded by calsync as for the calsync
    side, the provider a SQLite file of its own answering after ``latency_ms``.
    """
    ns = namespace("hand")
    data_dir = scratch / ns
    data_dir.mkdir(parents=True)
    with private_database(database, dsn, data_dir) as database_url:
        settings = Settings(data_dir=data_dir, broker_url=url, database_url=database_url, log_level="WARNING")
        setup = migrated_clients(settings)
        try:
            payloads = seed(setup.db, jobs)
        finally:
            setup.close()
        broker = RedisBroker(url=url, namespace=ns)
        actor = dramatiq.actor(broker=broker, actor_name="sync", queue_name=QUEUE, max_retries=0)(lambda *_: None)
        for p in payloads:
            actor.send(p.tenant_id, p.entity_id, p.account_id, p.target_version, p.idempotency_key, p.job_id)
        parsed = make_url(database_url)  # the driver's own form: a file path, or libpq's postgresql:// URL
        if database == "sqlite":
            driver_url = str(parsed.database)
        else:
            driver_url = parsed.set(drivername="postgresql").render_as_string(hide_password=False)
        env = {**os.environ, "BENCH_REDIS_URL": url, "BENCH_NAMESPACE": ns, "BENCH_DATABASE": driver_url,
               "BENCH_PROVIDER_FILE": str(data_dir / "provider.sqlite3"),
               "BENCH_LATENCY_MS": str(latency_ms)}  # fmt: skip
        command = [sys.executable, "-m", "dramatiq", "benchmarks.hand_written_app:broker", "--processes",
                   str(shape.processes), "--threads", str(shape.threads), "--queues", QUEUE]  # fmt: skip
        client = redis.Redis.from_url(url)
        try:
            with running(command, env, data_dir / "worker.log") as worker:
                return drain(f"hand-written job ({database})", client, ns, jobs, worker)
        finally:
            broker.close()
            client.close()
            remove_keys(url, ns)


@functools.cache
def _settings_of(tree: Path) -> frozenset[str]:
    listed = subprocess.run([sys.executable, "-c", "from calsync.core.config.settings import setting_names; "
                             "print(*setting_names())"], check=True, capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": str(tree)}, cwd=tree)  # fmt: skip
    return frozenset(listed.stdout.split())


def tree_environment(settings: Settings, tree: Path) -> dict[str, str]:
    """The child environment for a compared tree: only the settings it knows (an unknown one stops it)."""
    known = _settings_of(tree)
    env = {name: value for name, value in child_environment(settings).items()
           if not name.startswith(ENV_PREFIX) or name in known}  # fmt: skip
    return {**env, "PYTHONPATH": str(tree)}


def calsync(url: str, jobs: int, shape: Shape, scratch: Path, database: str, dsn: str, tree: Path | None = None,
            adapter: Adapter = Adapter(), latency_ms: int = 0, pods: int = 1) -> Drain:  # fmt: skip
    """``calsync worker`` as deployed: metrics, heartbeats, JSON logs, the memory provider's SQLite file.

    ``tree``: run the worker from another checkout of calsync (``--compare``, e.g. the previous release), its
    database migrated by that checkout too.
    ``adapter``: sync through another adapter (benchmarks/adapters.py).
    ``latency_ms``: every memory-provider write answers after it (a delay-only fault rule, the provider's own
    way to slow down; looking the rule up costs each write one more short transaction on the provider's file).
    ``pods``: that many separate ``calsync worker`` commands of ``shape`` each, as pods of one Deployment on one
    machine (each its own metrics port and directory; the database, Redis and calendar shared).
    """
    ns = namespace("calsync")
    data_dir = scratch / ns
    with private_database(database, dsn, data_dir) as database_url:
        data_dir.mkdir(parents=True, exist_ok=True)
        if database == "postgresql":  # the worker's connections, told apart in pg_stat_activity
            named = make_url(database_url).update_query_dict({"application_name": ns})
            database_url = named.render_as_string(hide_password=False)
        settings = Settings(
            data_dir=data_dir,
            broker_url=url,
            database_url=database_url,
            redis_namespace=ns,
            queue=QUEUE,
            worker_processes=shape.processes,
            worker_threads=shape.threads,
            log_level="INFO",
            metrics_host="127.0.0.1",
            metrics_port=free_port(),
            secret_key=generate_key() if adapter.credentials is not None else None,
            **adapter.settings,
        )
        setup = migrated_clients(settings)
        try:
            if tree is not None:  # a newer compared tree adds its own migrations (an older one says "ahead")
                env = tree_environment(settings, tree)
                calsync = str(Path(sys.executable).with_name("calsync"))
                subprocess.run([calsync, "migrate"], check=True, cwd=tree, env=env, capture_output=True)
            credentials = None if adapter.credentials is None else setup.cipher.encrypt(adapter.credentials)
            for payload in seed(setup.db, jobs, adapter.provider, address=adapter.address, credentials=credentials,
                                options=adapter.options):  # fmt: skip
                setup.broker.enqueue(sync_message(settings.queue, payload))
            if latency_ms and adapter.provider == "memory":
                provider = MemoryProvider(settings.effective_memory_provider_path)
                provider.add_fault(op="upsert", error=None, delay_ms=latency_ms)
                provider.close()
        finally:
            setup.close()
        command = [str(Path(sys.executable).with_name("calsync")), "worker"]
        client = redis.Redis.from_url(url)
        try:
            env = child_environment(settings) if tree is None else tree_environment(settings, tree)
            label = "worker" if adapter.provider == "memory" else adapter.provider
            if tree is not None:
                label = tree.name if adapter.provider == "memory" else f"{label} {tree.name}"
            name = f"calsync {label} ({database})" + (f" x {pods} pods" if pods > 1 else "")
            with contextlib.ExitStack() as stack:
                workers = []
                for pod in range(pods):
                    own = {f"{ENV_PREFIX}METRICS_PORT": str(free_port()),
                           f"{ENV_PREFIX}METRICS_DIR": str(data_dir / f"metrics-{pod}")} if pod else {}  # fmt: skip
                    # dramatiq puts its working directory first on sys.path: the compared tree's calsync must be there
                    log = data_dir / f"worker-{pod}.log"
                    workers.append(stack.enter_context(running(command, {**env, **own}, log, cwd=tree or ROOT)))
                drained = drain(name, client, ns, jobs, workers, adapter.emulator, adapter.served)
                if database == "postgresql":
                    _print_connections(name, dsn, ns, Shape(shape.processes * pods, shape.threads))
                return drained
        finally:
            client.close()
            remove_keys(url, ns)


def _print_connections(name: str, dsn: str, application: str, shape: Shape) -> None:
    """The PostgreSQL connections the worker holds once every thread has run jobs (its pools' steady state)."""
    import psycopg

    with psycopg.connect(dsn) as conn:
        query = "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s"
        row = conn.execute(query, (application,)).fetchone()
    held = int(row[0]) if row else 0
    print(f"  {name}: {held} PostgreSQL connections held ({held / shape.processes:.1f} per process of {shape.threads}"
          " threads)", flush=True)  # fmt: skip


def round_trips(url: str, jobs: int, scratch: Path, dsn: str) -> float:
    """PostgreSQL round trips per sync job of an in-process worker (``traced_round_trips``)."""
    ns = namespace("round-trips")
    data_dir = scratch / ns
    with private_database("postgresql", dsn, data_dir) as database_url:
        data_dir.mkdir(parents=True, exist_ok=True)
        settings = Settings(data_dir=data_dir, broker_url=url, database_url=database_url, redis_namespace=ns,
                            queue=QUEUE, log_level="WARNING")  # fmt: skip
        migrated_clients(settings).close()
        worker = build_worker(settings, providers={"memory": MemoryProvider()})
        try:
            payloads = seed(worker.clients.db, jobs)
            with traced_round_trips(worker.clients.db.engine, data_dir) as trips:
                broker = worker.clients.broker
                broker.emit_after("process_boot")
                for payload in payloads:
                    broker.enqueue(sync_message(settings.queue, payload))
                client = redis.Redis.from_url(url)
                runner = dramatiq.Worker(broker, worker_threads=8, worker_timeout=100)
                runner.start()
                while int(client.hlen(f"{ns}:{QUEUE}.msgs")):
                    time.sleep(POLL_SECONDS)
                runner.stop()
                client.close()
            return trips() / jobs
        finally:
            worker.close()
            remove_keys(url, ns)


def _configuration(args: argparse.Namespace, url: str) -> str:
    return "\n".join([
        f"calsync worker vs the hand-written job vs bare dramatiq: {args.jobs} jobs queued first per side, "
        "drain timed from 90 % to 10 % left",
        f"  shapes {', '.join(map(str, args.shapes))} (processes x threads), calsync as {args.pods} worker command(s) "
        f"of each (the other sides with as many processes), {args.rounds} rounds, sides alternating, "
        f"provider latency {args.latency_ms} ms (calsync's memory provider and the hand-written job's provider)",
        f"  Redis {url} ({'explicit' if args.redis_url else 'embedded, own'}), database {' and '.join(args.database)}, "
        "metrics + heartbeats + JSON logs (INFO) on",
        f"  {platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} CPUs ({_cpu_model()}), "
        f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}",
    ])  # fmt: skip


def _cpu_model() -> str:
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return platform.processor() or "unknown CPU"
    return next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), "unknown CPU")


def _shapes(text: str) -> list[Shape]:
    shapes = []
    for part in text.split(","):
        processes, _, threads = part.strip().partition("x")
        shapes.append(Shape(int(processes), int(threads)))
    return shapes


def _databases(text: str) -> list[str]:
    names = [part.strip() for part in text.split(",")]
    unknown = sorted(set(names) - {"sqlite", "postgresql"})
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"databases are sqlite and postgresql, not {unknown}")
    return list(dict.fromkeys(names))


def _sides(args: argparse.Namespace, url: str, shape: Shape, scratch: Path) -> list[tuple[str, Any]]:
    """Every side of one shape and round: bare, then the hand-written job and calsync (and the compared tree)
    on each database. With ``--pods N`` calsync runs as N worker commands of the shape, the other sides with
    N times its processes: the same processes and threads in all."""
    whole = Shape(shape.processes * args.pods, shape.threads)
    sides: list[tuple[str, Any]] = [("bare", lambda: bare(url, args.jobs, whole, scratch))]
    trees: list[tuple[str, Path | None]] = [("calsync", None)]
    if args.compare is not None:
        trees.append(("compared", args.compare))
    for database in args.database:
        by_hand = functools.partial(hand, url, args.jobs, whole, scratch, database, args.postgres_dsn, args.latency_ms)
        sides.append((f"hand {database}", by_hand))
        for name, tree in trees:
            run = functools.partial(calsync, url, args.jobs, shape, scratch, database, args.postgres_dsn, tree,
                                    latency_ms=args.latency_ms, pods=args.pods)  # fmt: skip
            sides.append((f"{name} {database}", run))
    return sides


def main() -> None:
    """Run every shape's sides, alternating, and print the comparison."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--shapes", type=_shapes, default=_shapes("1x8,2x8"), help="e.g. 1x8,2x8")
    parser.add_argument("--database", type=_databases, default=["sqlite"],
                        help="sqlite, postgresql, or both side by side: sqlite,postgresql")  # fmt: skip
    parser.add_argument("--postgres-dsn", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--latency-ms", type=int, default=0, help="the provider's latency per write, both sides")
    parser.add_argument("--compare", type=Path, help="also run the worker of this calsync checkout (before/after)")
    parser.add_argument("--pods", type=int, default=1, help="calsync as this many separate worker commands")
    add_redis_option(parser)
    args = parser.parse_args()
    results: dict[tuple[str, str], list[Drain]] = {}
    with tempfile.TemporaryDirectory(prefix="calsync-bench-worker-") as tmp, bench_redis(args.redis_url,
                                                                                         Path(tmp)) as url:  # fmt: skip
        scratch = Path(tmp)
        print(_configuration(args, url), flush=True)
        for n in range(1, args.rounds + 1):
            for shape in args.shapes:
                sides = _sides(args, url, shape, scratch)
                if n % 2 == 0:
                    sides.reverse()
                measured = {side: run() for side, run in sides}
                print(f"round {n}, {shape}:", flush=True)
                for side, drained in measured.items():
                    results.setdefault((str(shape), side), []).append(drained)
                    _print(drained)
                for side, drained in measured.items():
                    if side != "bare":
                        print(f"  {side}/bare: {drained.rate / measured['bare'].rate:.2f}", flush=True)
                for side, over in _over_hand(measured):
                    print(f"  {side}/{over}: {measured[side].rate / measured[over].rate:.2f}", flush=True)
        if "postgresql" in args.database:
            trips = round_trips(url, 500, scratch, args.postgres_dsn)
            print(f"PostgreSQL round trips per sync job (500 jobs, libpq trace): {trips:.2f}", flush=True)
    print(f"median of {args.rounds} rounds, provider latency {args.latency_ms} ms, "
          f"load average now {' '.join(f'{x:.1f}' for x in os.getloadavg())}:")  # fmt: skip
    for shape in args.shapes:
        measured = {side: runs for (kind, side), runs in results.items() if kind == str(shape)}
        for runs in measured.values():
            rate = statistics.median(d.rate for d in runs)
            cpu = statistics.median(d.cpu_ms_per_job for d in runs)
            commands = statistics.median(d.redis_commands_per_job for d in runs)
            print(f"  {shape} {runs[0].name:<28} {rate:7.0f} jobs/s  {cpu:5.2f} ms CPU/job  "
                  f"{commands:4.1f} Redis commands/job")  # fmt: skip
        for side, over in [(side, "bare") for side in measured if side != "bare"] + _over_hand(measured):
            ratios = [c.rate / o.rate for c, o in zip(measured[side], measured[over], strict=True)]
            goal = " -- the goal is >= 0.8" if over.startswith("hand") else ""
            print(f"  {shape} {side}/{over}: {statistics.median(ratios):.2f}{goal}"
                  f" (rounds: {', '.join(f'{x:.2f}' for x in ratios)})")  # fmt: skip


def _over_hand(sides: Mapping[str, object]) -> list[tuple[str, str]]:
    """Each calsync side (and the compared tree's) over the hand-written job on its database, then calsync
    over the compared tree (``--compare``: after/before)."""
    pairs = [(side, f"hand {side.split()[-1]}") for side in sides if side.startswith(("calsync", "compared"))]
    return pairs + [(side, f"compared {side.split()[-1]}") for side in sides
                    if side.startswith("calsync") and f"compared {side.split()[-1]}" in sides]  # fmt: skip


def _print(drain: Drain) -> None:
    print(f"  {drain.name:<28} {drain.rate:7.0f} jobs/s  ({drain.jobs} jobs in {drain.seconds:5.2f} s, "
          f"{drain.cpu_ms_per_job:5.2f} ms CPU/job, {drain.redis_commands_per_job:4.1f} Redis commands/job)",
          flush=True)  # fmt: skip


if __name__ == "__main__":
    main()

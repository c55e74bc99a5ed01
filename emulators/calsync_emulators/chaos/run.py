"""One chaos run, top to bottom: set up, load under faults and crashes, settle, check, replay, check, clean up.

Set-up owns what it starts and nothing else: a scratch directory, a Redis Sentinel topology (unless a broker
was given), a schema of its own in the given PostgreSQL (or a SQLite file), a key namespace, the calendar
backend and N worker commands. Whatever happens, :func:`run` stops and removes all of it before it returns.
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from calsync.core.clients import Clients, connect
from calsync.core.config.logging import configure_logging
from calsync.core.config.settings import Settings
from calsync.core.producer import dead_letters as dlq
from calsync.core.producer.reconcile import reconcile
from calsync.core.producer.submit import Producer
from calsync.core.store import dead_letters, events, migrate, targets
from calsync.core.store.crypto import generate_key
from calsync.core.store.database import Database
from calsync.core.store.dead_letters import DeadLetter, DeadLetterFilter
from calsync_emulators.chaos.backends import Backend, BackendName, GoogleBackend, MemoryBackend
from calsync_emulators.chaos.fleet import Fleet
from calsync_emulators.chaos.invariants import INVARIANTS, Accepted, Letter, TargetId, Verdict, check, converged
from calsync_emulators.chaos.load import Load
from calsync_emulators.chaos.outages import DatabaseRestart, fail_over
from calsync_emulators.harness import scratch, sentinel
from calsync_emulators.harness.waiting import wait_until

TENANT = "chaos"

#: Timings scaled down so that a run of a minute sees jobs retried, crashed jobs given back and locks expire
#: (the "test" profile: the broker's crash recovery runs on more fetches). The lock settings satisfy the
#: settings' own check (a crashed job's waits outlast the lock).
TIMINGS: dict[str, Any] = {
    "profile": "test",
    "retry_schedule": (0.5, 1, 2, 4),
    "retry_jitter": 0.2,
    "provider_timeout": 3,
    "job_time_limit": 6,
    "lock_ttl": 8,
    "lock_retry_delay": 0.1,
    "lock_max_waits": 60,
    "broker_heartbeat_timeout": 5,
    "reconcile_after": 10,
    "coalesce_window": 0,
}


def queues(ns: str) -> dict[str, str]:
    """The run's own queue names (settings): on a broker shared with a deployment (RabbitMQ has no namespace) its
    workers never consume the deployment's intake or webhook messages, nor its workers the run's."""
    return {"queue": ns, "intake_queue": f"{ns}-intake", "webhook_queue": f"{ns}-webhooks"}


@dataclass(frozen=True)
class Options:
    """What ``python -m calsync_emulators.chaos`` was asked for."""

    seconds: float = 40
    workers: int = 2
    threads: int = 4
    kill_every: float = 8
    fault_every: float = 2
    accounts: int = 3
    entities: int = 8
    submit_every: float = 0.05
    provider: BackendName = "memory"
    latency_ms: int = 0
    broker_url: str | None = None
    redis_url: str | None = None
    database_url: str | None = None
    database_restart_command: str | None = None
    settle_seconds: float = 120
    directory: Path | None = None


@dataclass
class Report:
    """What happened and the verdict; printed by :meth:`lines`."""

    timeline: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    verdict: Verdict = field(default_factory=Verdict)
    error: str | None = None

    @property
    def passed(self) -> bool:
        """Every invariant checked and none violated."""
        return self.error is None and set(self.verdict.violations) == set(INVARIANTS) and self.verdict.holds

    def lines(self) -> list[str]:
        """The report as text."""
        out = ["chaos run", *(f"  {line}" for line in self.timeline)]
        out += [f"skipped: {why}" for why in self.skipped]
        out += ["counts: " + ", ".join(f"{k} {v}" for k, v in self.counts.items())]
        for invariant, violations in self.verdict.violations.items():
            out.append(f"{'HOLDS' if not violations else 'VIOLATED'}  {invariant}")
            out += [f"    {line}" for line in violations[:20]]
            if len(violations) > 20:
                out.append(f"    ... and {len(violations) - 20} more")
        if self.error is not None:
            out.append(f"ERROR  {self.error}")
        out.append("verdict: " + ("PASS: every invariant holds" if self.passed else "FAIL"))
        return out


def run(options: Options, say: Callable[[str], None] = print) -> Report:
    """One chaos run; every process, key and schema it made is gone when it returns."""
    report = Report()

    def note(line: str) -> None:
        report.timeline.append(line)
        say(line)

    with contextlib.ExitStack() as stack:
        directory = options.directory or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="chaos-")))
        directory.mkdir(parents=True, exist_ok=True)
        ns = scratch.namespace("chaos")
        configure_logging("WARNING", stack.enter_context(open(directory / "chaos.log", "a")))
        broker_url, topology = _redis(options, directory, stack, report)
        database_url = _database(options, directory, ns, stack, report)
        values: dict[str, Any] = {"data_dir": directory, "broker_url": broker_url, "database_url": database_url,
                                  "redis_url": options.redis_url or broker_url, "redis_namespace": ns, **queues(ns),
                                  "secret_key": generate_key(), "log_level": "INFO", **TIMINGS}  # fmt: skip
        backend = _backend(options, Settings(**values).effective_memory_provider_path, stack)
        settings = Settings(**values, **backend.settings)
        clients = _clients(settings, stack)
        if options.broker_url is not None:
            stack.callback(scratch.remove_keys, settings.redis_url or broker_url, ns)
            if broker_url.startswith("amqp"):
                stack.callback(scratch.remove_queues, broker_url, scratch.rabbitmq_queues(*queues(ns).values()))
        restart = None
        if not database_url.startswith("sqlite"):
            restart = DatabaseRestart(database_url, ns, options.database_restart_command)
        accounts = [backend.add_account(clients, TENANT, n) for n in range(options.accounts)]
        entities = [f"evt-{n}" for n in range(options.entities)]
        fleet = Fleet(settings, directory, options.workers, options.threads)
        stack.callback(fleet.stop)
        fleet.start()
        fleet.wait_ready(timeout=120)
        load = Load(Producer(clients), TENANT, accounts, entities, options.submit_every)
        stack.callback(load.stop)
        note(f"{options.workers} workers x {options.threads} threads, {options.provider} calendars "
             f"({options.accounts} accounts x {options.entities} events), load for {options.seconds:g} s")  # fmt: skip
        if restart is not None:  # the schema it drops at the end (its name, for whoever checks it is gone)
            note(f"database: its own schema {scratch.schema_of(database_url)}, dropped at the end")
        try:
            load.start()
            _chaos(options, backend, fleet, topology, restart, entities, note)
            load.stop()
            backend.faults_off()
            note(f"load stopped after {load.submitted} accepted changes ({len(load.refused)} refused and resent); "
                 "faults off")  # fmt: skip
            # The last change of one event refused for good: its targets end in the DLQ, for the replay to bring.
            note(f"last change of {entities[0]} under {backend.refuse(entities[0], len(accounts))}")
            load.last(entities[0])
            _settle(clients, options.settle_seconds, note, "the load")
            accepted = _accepted(clients, load.titles, accounts)
            sync_keys = {f"{TENANT}:{a.target.entity_id}:{a.target.account_id}": a.target for a in accepted}
            records = _open_dead_letters(clients)
            letters = [_letter(record) for record in records]
            applied = backend.applied(sync_keys)
            report.skipped += backend.unchecked()
            verdict = check(accepted, applied, backend.shown(sync_keys), letters)
            backend.faults_off()
            replayed = dlq.replay(clients, records)
            note(f"{len(letters)} dead letters; {len(replayed.replayed)} replayed, {len(replayed.skipped)} skipped")
            _settle(clients, options.settle_seconds, note, "the replay")
            verdict.violations["replay converges"] = converged(accepted, backend.shown(sync_keys))
            report.verdict = verdict
            report.counts = {"accepted changes": load.submitted, "targets": len(accepted), "effects": len(applied),
                             "dead letters": len(letters), "worker kills": fleet.kills,
                             "given up submits": len(load.given_up)}  # fmt: skip
        except Exception as exc:
            report.error = f"{type(exc).__name__}: {exc}"
            say(fleet.logs())
    return report


def _chaos(options: Options, backend: Backend, fleet: Fleet, topology: sentinel.Topology | None,
           restart: DatabaseRestart | None, entities: list[str], note: Callable[[str], None]) -> None:  # fmt: skip
    """The timeline: a provider fault every ``fault_every`` s, a worker SIGKILL every ``kill_every`` s, the Redis
    failover at a third of the run and the database restart at two thirds."""
    start = time.monotonic()
    due = {"fault": options.fault_every, "kill": options.kill_every, "failover": options.seconds / 3,
           "restart": options.seconds * 2 / 3}  # fmt: skip
    if topology is None:
        del due["failover"]
    if restart is None:
        del due["restart"]
    faults = 0
    while (now := time.monotonic() - start) < options.seconds:
        for what, at in sorted(due.items(), key=lambda item: item[1]):
            if now < at:
                continue
            stamp = f"{now:5.1f} s"
            if what == "fault":
                note(f"{stamp}  provider fault: {backend.inject(faults, entities[faults % len(entities)])}")
                faults += 1
                due["fault"] = at + options.fault_every
            elif what == "kill":
                note(f"{stamp}  {fleet.kill_next()}")
                due["kill"] = at + options.kill_every
            elif what == "failover" and topology is not None:
                note(f"{stamp}  {fail_over(topology)}")
                del due["failover"]
            elif what == "restart" and restart is not None:
                note(f"{stamp}  {restart()}")
                del due["restart"]
        if crashed := fleet.exited():
            raise RuntimeError(f"workers {crashed} exited by themselves")
        time.sleep(0.1)


def _redis(options: Options, directory: Path, stack: contextlib.ExitStack,
           report: Report) -> tuple[str, sentinel.Topology | None]:  # fmt: skip
    """The broker's URL: the given one (no failover: not the run's Redis), or the run's own Sentinel topology."""
    if options.broker_url is not None:
        report.skipped.append("Redis failover: the broker and Redis were given (--broker-url), not this run's to kill")
        return options.broker_url, None
    binary = sentinel.redis_server_binary()
    if binary is None:
        raise RuntimeError("redis-server is not on the PATH: install it, or give --broker-url")
    (directory / "redis").mkdir(parents=True, exist_ok=True)
    topology = stack.enter_context(sentinel.sentinel_topology(directory / "redis", binary))
    return topology.url, topology


def _database(options: Options, directory: Path, ns: str, stack: contextlib.ExitStack, report: Report) -> str:
    """The run's database: a schema of its own in the given PostgreSQL (dropped afterwards), or a SQLite file."""
    if options.database_url is None:
        report.skipped.append("database restart: SQLite has no server (give --database-url of a PostgreSQL)")
        return f"sqlite:///{directory / 'calsync.sqlite3'}"
    return stack.enter_context(scratch.private_schema(options.database_url, "chaos", application_name=ns))


def _backend(options: Options, memory_path: Path, stack: contextlib.ExitStack) -> Backend:
    backend: Backend
    if options.provider == "google":
        backend = GoogleBackend(options.latency_ms)
    else:
        backend = MemoryBackend(memory_path, options.latency_ms)
    stack.callback(backend.close)
    return backend


def _clients(settings: Settings, stack: contextlib.ExitStack) -> Clients:
    """The run's own clients, on a database migrated to the head first."""
    bootstrap = Database(settings.effective_database_url)
    try:
        migrate.migrate_to(bootstrap)
    finally:
        bootstrap.dispose()
    clients = connect(settings)
    stack.callback(clients.close)
    return clients


def _pending(clients: Clients) -> int:
    with clients.db.read() as conn:
        return targets.count_by_status(conn).get("pending", 0)


def _settle(clients: Clients, seconds: float, note: Callable[[str], None], after: str) -> None:
    """Wait until nothing is pending: one reconciler pass re-enqueues what the outages took with them."""
    started = time.monotonic()
    with contextlib.suppress(AssertionError):
        wait_until(lambda: _pending(clients) == 0, timeout=min(20, seconds), what="the workers to settle")
    requeued = reconcile(clients, older_than=0).enqueued
    wait_until(lambda: _pending(clients) == 0, timeout=seconds, what="every target to leave pending")
    note(f"settled {time.monotonic() - started:.1f} s after {after} (the reconciler re-enqueued {requeued})")


def _accepted(clients: Clients, titles: dict[str, str], accounts: list[str]) -> list[Accepted]:
    with clients.db.read() as conn:
        versions = {entity: events.get_event(conn, TENANT, entity) for entity in titles}
    return [Accepted(TargetId(account, entity), state.version, titles[entity])
            for entity, state in versions.items() if state is not None for account in accounts]  # fmt: skip


def _open_dead_letters(clients: Clients) -> list[DeadLetter]:
    with clients.db.read() as conn:
        return dead_letters.find(conn, DeadLetterFilter())


def _letter(record: DeadLetter) -> Letter:
    target = TargetId(record.account_id, record.entity_id) if record.account_id and record.entity_id else None
    body, size = record.raw_body, record.raw_size
    return Letter(record.id, record.kind, record.job_type, target, record.payload,
                  body is not None and size is not None and len(body) >= size)  # fmt: skip

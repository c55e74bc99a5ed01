"""``calsync demo``: the whole pipeline on embedded defaults, with a scripted burst of trouble.

It starts a fresh data dir (embedded Redis, SQLite), the provider emulators and a real worker
process, submits a burst that exercises every mechanism — rapid successive edits of one event, a
provider call that fails twice then succeeds, a permanent failure, a corrupt payload, Google 503s and
a 429 with Retry-After, Exchange throttling over EWS, a Graph 429 with Retry-After — shows progress,
and ends with what happened.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dramatiq
from rich.console import Console
from rich.live import Live
from rich.table import Table

from calsync.core.clients import Clients, connect
from calsync.core.config.settings import Settings, child_environment
from calsync.core.model.payload import SYNC_JOB
from calsync.core.producer.submit import Producer
from calsync.core.redis.embedded import EmbeddedRedis
from calsync.core.redis.stats import JobStats
from calsync.core.store import accounts, dead_letters, targets
from calsync.core.store.crypto import generate_key
from calsync.core.store.dead_letters import DeadLetterFilter
from calsync.providers.memory import MemoryProvider
from calsync_emulators import google, graph
from calsync_emulators.control import GoogleControl, GraphControl
from calsync_emulators.demo_report import (
    dead_letters_table,
    inspect_commands,
    jobs_table,
    progress_table,
    provider_calls_table,
)
from calsync_emulators.server import RunningEmulator

TENANT = "acme"
TIMEOUT_S = 180


@dataclass
class Scenario:
    """What the burst submitted, to explain the results."""

    accounts: dict[str, str] = field(default_factory=dict)
    entities: dict[str, str] = field(default_factory=dict)
    expected_dead_letters: int = 0


def _event(title: str, day: int, hour: int, **extra: Any) -> dict[str, Any]:
    return {
        "title": title,
        "start": f"2026-12-{day:02d}T{hour:02d}:00:00",
        "end": f"2026-12-{day:02d}T{hour:02d}:45:00",
        "time_zone": "Asia/Jakarta",
        **extra,
    }


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Demo:
    """One demo run in its own data directory."""

    def __init__(self, base: Settings, console: Console) -> None:
        self.console = console
        self.directory = base.data_dir / "demo"
        self.directory.mkdir(parents=True, exist_ok=True)
        tls = graph.self_signed(self.directory)
        self.google = RunningEmulator(google.create_app())
        # One Exchange server: EWS (http) and Graph + Entra (https) on one port, over one mailbox store.
        self.ews = RunningEmulator(graph.create_app(), tls=tls.context)
        self.google_control = GoogleControl(self.google.url, timeout=5)
        self.ews_control = GraphControl(self.ews.url, timeout=5)
        self.settings = Settings(
            data_dir=self.directory,
            secret_key=generate_key(),
            retry_schedule=(1, 2, 4),
            retry_jitter=0.2,
            provider_timeout=5,
            job_time_limit=20,
            lock_ttl=25,  # within the lock-wait budget: 20 s heartbeat timeout + 30 waits x 0.3 s x (1 - jitter)
            lock_retry_delay=0.3,
            google_api_endpoint=self.google_control.api_endpoint,
            graph_api_endpoint=self.ews_control.api_endpoint,
            graph_ca_file=tls.ca_file,
            log_level="INFO",
            metrics_host="127.0.0.1",
            metrics_port=_free_port(),  # the demo's worker never takes a port a worker of yours may hold
        )
        self.clients: Clients | None = None
        self.memory = MemoryProvider(self.settings.effective_memory_provider_path)
        self.worker: subprocess.Popen[bytes] | None = None

    # --- set-up -------------------------------------------------------------------------------

    def start(self) -> Clients:
        """Fresh data dir, embedded Redis, migrated SQLite, and a worker process."""
        self.clients = connect(self.settings)  # starts the embedded Redis and migrates SQLite
        env = child_environment(self.settings)
        env.update(CALSYNC_BROKER_URL=self.clients.broker_url, CALSYNC_REDIS_URL=self.clients.redis_url)
        log = open(self.directory / "worker.log", "ab")  # noqa: SIM115 - closed with the process
        self.worker = subprocess.Popen(
            [sys.executable, "-m", "calsync.actors.cli.main", "worker", "--processes", "1", "--threads", "8"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        return self.clients

    def _account(
        self,
        provider: Any,
        address: str,
        credentials: dict[str, Any] | None = None,
        options: dict[str, Any] | None = None,
    ) -> str:
        assert self.clients is not None
        blob = self.clients.cipher.encrypt(credentials) if credentials else None
        with self.clients.db.write() as conn:
            return accounts.add_account(
                conn, tenant_id=TENANT, provider=provider, address=address, credentials=blob, options=options or {}
            ).id

    def submit_burst(self) -> Scenario:
        """Every kind of trouble the pipeline is built for, in one go."""
        assert self.clients is not None
        scenario = Scenario()
        team = scenario.accounts["team calendar (memory)"] = self._account("memory", "team@acme.example")
        ceo = scenario.accounts["ceo@acme (Google)"] = self._account(
            "google",
            "ceo@acme.example",
            self.google_control.user_credentials(
                "1//demo-refresh-token", "demo-client.apps.googleusercontent.com", "demo-client-secret"
            ),
        )
        cfo = scenario.accounts["cfo@acme (Exchange)"] = self._account(
            "exchange",
            "cfo@acme.example",
            {"username": "svc@example.com", "password": "svc-password"},
            {"server_url": self.ews_control.server_url, "auth_type": "basic", "access_type": "impersonation"},
        )
        coo = scenario.accounts["coo@acme (Graph)"] = self._account(
            "graph", "coo@acme.example", self.ews_control.app_credentials()
        )
        # Trouble, injected at the providers.
        self.memory.add_fault(error="unavailable", title="^Flaky", times=2, message="503 from the calendar backend")
        self.memory.add_fault(error="forbidden", title="^Board", message="calendar is read-only for this account")
        self.google_control.add_fault(method="POST", path="/events$", status=503, times=3)
        self.google_control.add_fault(method="PUT", path="/events/", status=429, retry_after=2, times=1)
        # Exchange throttles: ErrorServerBusy with a back-off hint, three times in a row.
        self.ews_control.add_fault(operation="CreateItem", reason="ErrorServerBusy", level="fault", retry_after=2,
                                   times=3)  # fmt: skip
        # Graph throttles the Exchange Online mailbox: 429 with Retry-After, twice.
        self.ews_control.add_fault(operation="events.create", status=429, reason="ApplicationThrottled",
                                   message="Too many requests", retry_after=2, times=2)  # fmt: skip

        producer = Producer(self.clients)
        review = producer.submit(TENANT, {"operation": "upsert", "accounts": [team, ceo, cfo],
                                          "event": _event("Design review", 1, 9)})  # fmt: skip
        for n, hour in enumerate((10, 11, 13), start=2):  # a user edits the event three more times, fast
            producer.submit(TENANT, {"operation": "upsert", "entity_id": review.entity_id,
                                     "event": _event(f"Design review (edit {n})", 1, hour)})  # fmt: skip
        scenario.entities["Design review (4 quick edits)"] = review.entity_id
        flaky = producer.submit(TENANT, {"operation": "upsert", "accounts": [team],
                                         "event": _event("Flaky sync", 2, 9)})  # fmt: skip
        scenario.entities["Flaky sync (fails twice)"] = flaky.entity_id
        board = producer.submit(TENANT, {"operation": "upsert", "accounts": [team],
                                         "event": _event("Board meeting", 3, 9)})  # fmt: skip
        scenario.entities["Board meeting (read-only calendar)"] = board.entity_id
        call = producer.submit(
            TENANT,
            {
                "operation": "upsert",
                "accounts": [ceo],
                "send_updates": "all",
                "event": _event("Customer call", 4, 15, attendees=["buyer@customer.example"]),
            },
        )
        scenario.entities["Customer call (Google 503s)"] = call.entity_id
        producer.submit(
            TENANT,
            {
                "operation": "upsert",
                "entity_id": call.entity_id,
                "accounts": [ceo],
                "send_updates": "all",
                "event": _event("Customer call (moved)", 4, 16, attendees=["buyer@customer.example"]),
            },
        )
        budget = producer.submit(
            TENANT,
            {
                "operation": "upsert",
                "accounts": [cfo],
                "send_updates": "all",
                "event": _event("Budget review", 6, 10, attendees=["cfo@acme.example"]),
            },
        )
        scenario.entities["Budget review (Exchange throttling)"] = budget.entity_id
        offsite = producer.submit(
            TENANT,
            {
                "operation": "upsert",
                "accounts": [coo],
                "send_updates": "all",
                "event": _event("Offsite", 7, 9, attendees=["ceo@acme.example"]),
            },
        )
        scenario.entities["Offsite (Graph 429 + Retry-After)"] = offsite.entity_id
        lunch = producer.submit(TENANT, {"operation": "upsert", "accounts": [team, ceo],
                                         "event": _event("Team lunch", 5, 12)})  # fmt: skip
        producer.submit(TENANT, {"operation": "delete", "entity_id": lunch.entity_id})
        scenario.entities["Team lunch (created, then cancelled)"] = lunch.entity_id
        # A producer with a bug sends a payload of an unknown schema.
        self.clients.broker.enqueue(
            dramatiq.Message(queue_name=self.settings.queue, actor_name=SYNC_JOB, kwargs={}, options={},
                             args=({"job_id": "job_demo_corrupt", "event": "Board meeting", "version": "two"},))
        )  # fmt: skip
        scenario.expected_dead_letters = 2
        return scenario

    # --- watching -----------------------------------------------------------------------------

    def _progress(self) -> tuple[dict[str, int], Counter[str], int]:
        assert self.clients is not None
        with self.clients.db.read() as conn:
            by_status = targets.count_by_status(conn)
            dead = len(dead_letters.find(conn, DeadLetterFilter()))
        return by_status, JobStats(self.clients.redis, self.clients.keys).totals(minutes=60), dead

    def wait(self, scenario: Scenario) -> bool:
        """Show live progress until every target has settled and the expected dead letters are in."""
        deadline = time.monotonic() + TIMEOUT_S
        with Live(progress_table(*self._progress()), console=self.console, refresh_per_second=4) as live:
            while time.monotonic() < deadline:
                by_status, _, dead = self._progress()
                if by_status.get("pending", 0) == 0 and dead >= scenario.expected_dead_letters:
                    live.update(progress_table(*self._progress()))
                    return True
                if self.worker is not None and self.worker.poll() is not None:
                    self.console.print(f"[red]the worker exited ({self.worker.returncode}); see worker.log[/red]")
                    return False
                live.update(progress_table(*self._progress()))
                time.sleep(0.25)
        return False

    # --- results ------------------------------------------------------------------------------

    def summary(self, scenario: Scenario) -> None:
        """The closing tables: what each event became, job outcomes, dead letters and provider calls."""
        assert self.clients is not None
        names = {v: k for k, v in scenario.accounts.items()}
        events_table = Table(title="events", title_justify="left")
        for column in ("event", "account", "sync status", "synced/wanted version", "last error"):
            events_table.add_column(column)
        with self.clients.db.read() as conn:
            for label, entity in scenario.entities.items():
                for row in targets.list_targets(conn, TENANT, entity):
                    events_table.add_row(
                        label,
                        names.get(row.account_id, row.account_id),
                        row.status,
                        f"{row.synced_version}/{row.wanted_version}",
                        (row.last_error or "")[:60],
                    )
            records = dead_letters.find(conn, DeadLetterFilter())  # fmt: skip
        self.console.print(events_table)

        self.console.print(jobs_table(JobStats(self.clients.redis, self.clients.keys).totals(minutes=60)))
        self.console.print(dead_letters_table(records))
        self.console.print(
            provider_calls_table(self.memory.calls(), self.google_control.requests(), self.ews_control.requests())
        )
        self.console.print(f"data, logs and the worker log are in {self.directory}")
        first = next(iter(scenario.entities.values()), None)
        commands = inspect_commands(self.directory, TENANT, first, str(records[0].id) if records else None)
        self.console.print("inspect this run's data:", *(f"  {line}" for line in commands), sep="\n",
                           markup=False, highlight=False)  # fmt: skip

    # --- tear-down ----------------------------------------------------------------------------

    def stop_worker(self) -> None:
        """Stop the worker gracefully, so its last outcome counts are written (core.redis.stats)."""
        if self.worker is not None and self.worker.poll() is None:
            self.worker.send_signal(signal.SIGTERM)
            try:
                self.worker.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.worker.kill()

    def stop(self) -> None:
        """Stop the worker, the emulators and the embedded Redis."""
        self.stop_worker()
        if self.clients is not None:
            self.clients.close()
        self.google.stop()
        self.ews.stop()
        EmbeddedRedis(self.directory).stop()


@contextlib.contextmanager
def _fresh(directory: Path) -> Iterator[None]:
    EmbeddedRedis(directory).stop()  # a previous run's server, if it is still up
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    yield


def run_demo(settings: Settings, console: Console) -> int:
    """Run the scripted demo; 0 when everything settled as expected."""
    with _fresh(settings.data_dir / "demo"):
        demo = Demo(settings, console)
        try:
            console.print(f"[bold]calsync demo[/bold] in {demo.directory}: embedded Redis, SQLite, emulators, a worker")
            demo.start()
            scenario = demo.submit_burst()
            settled = demo.wait(scenario)
            demo.stop_worker()
            demo.summary(scenario)
            if not settled:
                console.print(f"[red]not everything settled within {TIMEOUT_S}s[/red]")
                return 1
            return 0
        finally:
            demo.stop()

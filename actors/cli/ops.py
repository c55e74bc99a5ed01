"""Operating commands: ``worker``, ``reconcile``, ``migrate``, ``stop``, ``secret-key``."""

from __future__ import annotations

import errno
import os
import socket
import sys

import click
import redis

from calsync.actors.cli.shell import CliState, empty_directory, pass_state, print_json, progress
from calsync.core.config.settings import worker_environment
from calsync.core.messaging.messages import reconcile_message
from calsync.core.model.errors import ConfigurationError
from calsync.core.observability.pipeline_state import consumed_queues, live_workers
from calsync.core.producer.reconcile import reconcile as run_reconcile
from calsync.core.redis.embedded import EmbeddedRedis
from calsync.core.redis.keys import RedisKeys
from calsync.core.store import migrate as migrations
from calsync.core.store.crypto import generate_key
from calsync.core.store.database import Database
from calsync.core.store.key_rotation import count_credentials, require_secret_key, rotate_credentials
from calsync.core.worker.heartbeat import HEARTBEAT_SUFFIX


def worker_command(state: CliState, processes: int, threads: int) -> list[str]:
    """The dramatiq command line a worker runs, with the broker URL resolved once for all processes."""
    settings = state.settings
    shutdown_ms = int(settings.worker_shutdown_timeout * 1000)
    return [
        sys.executable, "-m", "dramatiq", "calsync.actors.dramatiq_entry:broker",
        "--processes", str(processes), "--threads", str(threads),
        "--queues", *consumed_queues(settings),
        "--worker-shutdown-timeout", str(shutdown_ms),
        "--skip-logging",
    ]  # fmt: skip


def require_metrics_port(host: str, port: int) -> None:
    """Refuse to start a worker whose metrics port is taken (exit 2, one line).

    Dramatiq's exposition server would fail in its own process with a traceback while the workers ran on,
    unseen by Prometheus: the alerts that depend on worker metrics would go quiet. So the port is bound here
    once, as that server binds it (SO_REUSEADDR, so a port a stopped worker left in TIME_WAIT is free).
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            why = "in use" if exc.errno == errno.EADDRINUSE else (exc.strerror or type(exc).__name__)
            raise ConfigurationError(
                f"CALSYNC_METRICS_PORT {port} on {host} is {why}: a worker never runs without its metrics "
                "(its alerts would go quiet); stop what holds the port or set CALSYNC_METRICS_PORT to a free one"
            ) from None


@click.command("worker")
@click.option("--processes", type=click.IntRange(1), help="Worker processes (default CALSYNC_WORKER_PROCESSES).")
@click.option("--threads", type=click.IntRange(1), help="Threads per process (default CALSYNC_WORKER_THREADS).")
@pass_state
def worker(state: CliState, processes: int | None, threads: int | None) -> None:
    """Run the Dramatiq worker (replaces this process; SIGTERM drains it gracefully)."""
    settings = state.settings
    clients = state.clients  # resolves the broker (starting the embedded Redis) and checks the schema
    require_secret_key(clients.cipher, clients.db)  # one line here, not a crash in every worker process
    require_metrics_port(settings.metrics_host, settings.metrics_port)
    env = state.child_environment() | worker_environment(settings)
    # Files of a previous run would inflate gauges and carry counters over, and a stale heartbeat
    # file would fail the liveness probe: both directories start empty (docs/notes/dramatiq.md §metrics).
    empty_directory(settings.effective_metrics_dir, "*.db")
    empty_directory(settings.effective_heartbeat_dir, "*" + HEARTBEAT_SUFFIX)
    command = worker_command(state, processes or settings.worker_processes, threads or settings.worker_threads)
    state.close()
    sys.stdout.flush()
    os.execvpe(command[0], command, env)


@click.command("reconcile")
@click.option(
    "--older-than", type=click.FloatRange(0), help="Seconds a pending target may wait (CALSYNC_RECONCILE_AFTER)."
)
@click.option("--enqueue", is_flag=True, help="Only ask a worker to reconcile (what the CronJob does).")
@pass_state
def reconcile(state: CliState, older_than: float | None, enqueue: bool) -> None:
    """Re-enqueue pending targets whose jobs were lost; purge expired idempotency records."""
    clients = state.clients
    if enqueue:
        message = clients.broker.enqueue(reconcile_message(clients.settings.queue))
        print_json({"enqueued": message.message_id})
        return
    print_json(run_reconcile(clients, older_than=older_than).as_json())


@click.command("migrate")
@click.option(
    "--to", "target", metavar="REV", help="Move to this revision, up or down, or `head` (default: this release's head)."
)
@pass_state
def migrate(state: CliState, target: str | None) -> None:
    """Create, upgrade or downgrade the database schema (safe to run again; a compatible newer schema is kept)."""
    db = Database(state.settings.effective_database_url)
    try:
        print_json(migrations.migrate_to(db, target).as_json())
    finally:
        db.dispose()


@click.command("stop")
@pass_state
def stop(state: CliState) -> None:
    """Stop this data dir's embedded Redis (its append-only file keeps the queue for next time)."""
    settings = state.settings
    if settings.broker_url:
        click.echo("CALSYNC_BROKER_URL is set: there is no embedded Redis to stop", err=True)
        return
    embedded = EmbeddedRedis(settings.data_dir)
    waiting = []
    if (url := embedded.running_url()) is not None:
        with redis.Redis.from_url(url, socket_timeout=5) as client:
            waiting = [worker.worker for worker in live_workers(client, RedisKeys(settings.redis_namespace))]
    stopped = embedded.stop()
    if waiting:  # they reconnect once a command starts it again, at the same address (README "Command line")
        click.echo(f"calsync: note: worker process(es) {', '.join(waiting)} still run and wait for Redis to come "
                   "back (stop workers and `calsync serve` first to stop calsync)", err=True)  # fmt: skip
    print_json({"stopped": stopped, "data_dir": str(settings.data_dir), "workers_waiting": waiting})


@click.group("secret-key", invoke_without_command=True)
@click.pass_context
def secret_key(ctx: click.Context) -> None:
    """Print a new key for CALSYNC_SECRET_KEY (or the head of CALSYNC_SECRET_KEYS); `rotate` re-encrypts."""
    if ctx.invoked_subcommand is None:
        click.echo(generate_key())


@secret_key.command("rotate")
@click.option(
    "--batch", type=click.IntRange(1, 10000), default=100, show_default=True, help="Accounts per transaction."
)
@pass_state
def rotate(state: CliState, batch: int) -> None:
    """Re-encrypt every stored credential with the first of CALSYNC_SECRET_KEYS (idempotent, resumable)."""
    clients = state.clients
    if len(state.settings.cipher_keys) < 2:
        click.echo("calsync: note: only one secret key is configured; nothing can be rotated from an old key", err=True)
    with progress("re-encrypting credentials", count_credentials(clients.db)) as advance:
        report = rotate_credentials(clients.db, clients.cipher, batch=batch, on_progress=advance)
    print_json(report.as_json())

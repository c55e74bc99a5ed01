"""Operating commands: ``worker``, ``reconcile``, ``migrate``, ``stop``, ``secret-key``."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from calsync.actors.cli.common import CliState, pass_state, print_json
from calsync.core.config.settings import child_environment, metrics_environment
from calsync.core.messaging.messages import reconcile_message
from calsync.core.producer.reconcile import reconcile as run_reconcile
from calsync.core.redis.embedded import EmbeddedRedis
from calsync.core.runtime import Runtime
from calsync.core.store import migrate as migrations
from calsync.core.store.crypto import generate_key
from calsync.core.worker.heartbeat import HEARTBEAT_SUFFIX


def worker_command(state: CliState, processes: int, threads: int) -> list[str]:
    """The dramatiq command line a worker runs, with the broker URL resolved once for all processes."""
    settings = state.settings
    shutdown_ms = int(settings.worker_shutdown_timeout * 1000)
    return [
        sys.executable, "-m", "dramatiq", "calsync.actors.app:broker",
        "--processes", str(processes), "--threads", str(threads),
        "--queues", *dict.fromkeys((settings.queue, settings.intake_queue)),
        "--worker-shutdown-timeout", str(shutdown_ms),
        "--skip-logging",
    ]  # fmt: skip


def _empty(directory: Path, pattern: str) -> None:
    """Create ``directory`` or delete what a previous run left in it (only files calsync writes there)."""
    directory.mkdir(parents=True, exist_ok=True)
    for leftover in directory.glob(pattern):
        leftover.unlink(missing_ok=True)


@click.command("worker")
@click.option("--processes", type=click.IntRange(1), help="Worker processes (default CALSYNC_WORKER_PROCESSES).")
@click.option("--threads", type=click.IntRange(1), help="Threads per process (default CALSYNC_WORKER_THREADS).")
@pass_state
def worker(state: CliState, processes: int | None, threads: int | None) -> None:
    """Run the Dramatiq worker (replaces this process; SIGTERM drains it gracefully)."""
    settings = state.settings
    runtime = state.runtime  # resolves the broker (starting the embedded Redis) and checks the schema
    env = child_environment(settings)
    env["CALSYNC_BROKER_URL"] = runtime.broker_url
    env["CALSYNC_REDIS_URL"] = runtime.redis_url
    env.update(metrics_environment(settings))
    # Files of a previous run would inflate gauges and carry counters over, and a stale heartbeat
    # file would fail the liveness probe: both directories start empty (docs/notes/dramatiq.md §metrics).
    _empty(settings.effective_metrics_dir, "*.db")
    _empty(settings.effective_heartbeat_dir, "*" + HEARTBEAT_SUFFIX)
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
    runtime = state.runtime
    if enqueue:
        message = runtime.broker.enqueue(reconcile_message(runtime.settings.queue))
        print_json({"enqueued": message.message_id})
        return
    print_json(run_reconcile(runtime, older_than=older_than).as_json())


@click.command("migrate")
@pass_state
def migrate(state: CliState) -> None:
    """Create or upgrade the database schema (safe to run again)."""
    runtime = Runtime(state.settings, check_schema=False)
    try:
        print_json({"revision": migrations.upgrade(runtime.db)})
    finally:
        runtime.close()


@click.command("stop")
@pass_state
def stop(state: CliState) -> None:
    """Stop this data dir's embedded Redis (its append-only file keeps the queue for next time)."""
    settings = state.settings
    if settings.broker_url:
        click.echo("CALSYNC_BROKER_URL is set: there is no embedded Redis to stop", err=True)
        return
    stopped = EmbeddedRedis(settings.data_dir).stop()
    print_json({"stopped": stopped, "data_dir": str(settings.data_dir)})


@click.command("secret-key")
def secret_key() -> None:
    """Print a new key for CALSYNC_SECRET_KEY."""
    click.echo(generate_key())

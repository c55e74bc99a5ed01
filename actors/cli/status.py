"""``calsync status``: the pipeline at a glance for people without Grafana (a table, ``--json`` or ``--watch``).

It shows what the queue exporter exports (the same :class:`core.observability.pipeline_state.StateReader`), plus
recent throughput from the per-minute outcome counters of :mod:`core.redis.stats` and the pause switch.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import itertools
import json
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import click
from rich.console import Group, RenderableType
from rich.live import Live
from rich.text import Text

from calsync.actors.cli.shell import CliError, CliState, first_line, pass_state, stdout, table
from calsync.core.model.vocabulary import Outcome
from calsync.core.observability.pipeline_state import PipelineState, StateReader
from calsync.core.redis.pause import PauseState, PauseSwitch
from calsync.core.redis.stats import JobStats

THROUGHPUT_WINDOWS = (5, 60)


@dataclass(frozen=True)
class Status:
    """The pipeline's state, recent job outcome counts per window (minutes) and the pause switch; None when Redis
    could not be read."""

    state: PipelineState
    throughput: dict[int, Counter[str]] | None
    paused: PauseState | None = None

    def as_json(self) -> dict[str, Any]:
        """The document ``calsync status --json`` prints."""
        windows = self.throughput or {}
        return {
            **self.state.as_json(),
            "paused": self.paused.as_json() if self.paused is not None else None,
            "throughput": {f"last_{m}m": dict(sorted(c.items())) for m, c in windows.items()} or None,
        }


def read_status(reader: StateReader, stats: JobStats) -> Status:
    """Read everything ``calsync status`` shows."""
    state = reader.read()
    try:
        throughput = {minutes: stats.totals(minutes=minutes, now=state.at) for minutes in THROUGHPUT_WINDOWS}
        paused = PauseSwitch(reader.clients.redis, reader.keys).state()
    except Exception as exc:
        state.errors.setdefault("redis", f"{type(exc).__name__}: {exc}")
        return Status(state, None)
    return Status(state, throughput, paused)


#: A table of the status view: counts right-aligned, "n/a" for what could not be read.
_table = functools.partial(table, missing="n/a", justify="right")


def format_age(seconds: float | None) -> str:
    """A short human age: 0s, 42s, 5m 03s, 2h 05m, 3d 04h."""
    if seconds is None:
        return "n/a"
    if seconds < 60:
        return f"{seconds:.0f}s"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    return f"{days}d {hours:02d}h" if days else f"{hours}h {minutes:02d}m" if hours else f"{minutes}m {secs:02d}s"


def render(status: Status) -> RenderableType:
    """The human view: one small table per concern, then any source that could not be read."""
    state = status.state
    when = dt.datetime.fromtimestamp(state.at, dt.UTC).isoformat(timespec="seconds")
    workers = "n/a" if state.workers_active is None else state.workers_active
    parts: list[RenderableType] = [Text(f"calsync status at {when} — active workers: {workers}")]
    if (paused := status.paused) is not None:
        holding = sum(1 for w in state.workers or [] if w.paused)
        why = f" ({paused.reason})" if paused.reason else ""
        since = paused.as_json()["since"]
        line = f"PAUSED since {since} by {paused.by}{why}: {holding} of {workers} workers holding"
        parts.append(Text(f"{line}; `calsync resume` to go on", style="yellow"))
    for w in state.workers or []:
        if not w.healthy:
            line = f"worker {w.worker} is unhealthy: {w.threads_alive} of {w.threads} worker threads alive"
            parts.append(Text(f"{line} (the liveness probe restarts it)", style="red"))
    if state.queues is not None:
        rows = [(q.queue, q.ready, q.delayed, q.inflight, format_age(q.oldest_age_seconds)) for q in state.queues]
        parts.append(_table("queues", ("queue", "ready", "delayed", "in flight", "oldest ready"), rows))
    if (store := state.store) is not None:
        dlq, targets = store.dead_letters, store.targets
        oldest = f"oldest {format_age(dlq.oldest_age_seconds)}" if dlq.open else "none"
        by_reason = _table(f"open dead letters ({oldest})", ("reason", "open"), dlq.open_by_reason.items())
        by_reason.add_row("total", str(dlq.open), style="bold")
        title = f"sync targets (most overdue pending: {format_age(targets.pending_oldest_age_seconds)})"
        parts += [by_reason, _table(title, ("status", "targets"), targets.by_status.items())]
        age, overdue = format_age(store.drift.sweep_age_seconds), store.drift.sweeps_overdue
        line = f"drift verification: oldest sweep {age} ago, {overdue} sweeps overdue"
        parts.append(Text(line, style="yellow" if overdue else ""))
    if state.circuits:
        columns = ("provider", "provider breaker", "blocked for", "accounts open", "half-open", "e.g.")
        circuits = _table("circuit breakers", columns, [])
        for c in state.circuits:
            style = "red" if "open" in (c.state, c.accounts_state) else None
            blocked = format_age(c.blocked_for_seconds)
            cells = (c.state.replace("_", "-"), blocked, c.accounts_open, c.accounts_half_open)
            circuits.add_row(c.provider, *map(str, cells), ", ".join(c.some_accounts), style=style)
        parts.append(circuits)
    if (throughput := status.throughput) is not None:
        seen: set[str] = set().union(*throughput.values())
        outcomes = [*Outcome, *sorted(seen - set(Outcome))]  # StrEnum members are their values
        counts = [(outcome, *(throughput[m][outcome] for m in THROUGHPUT_WINDOWS)) for outcome in outcomes]
        parts.append(_table("job outcomes", ("outcome", *(f"last {m} min" for m in THROUGHPUT_WINDOWS)), counts))
    parts += [Text(f"{source} unavailable: {error}", style="red") for source, error in sorted(state.errors.items())]
    return Group(*parts)


@click.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document (with --watch: one per line).")
@click.option("--watch", is_flag=True, help="Refresh every --interval seconds (not a terminal: print each refresh).")
@click.option(
    "--interval", type=click.FloatRange(min=0.05), default=2.0, show_default=True, help="Seconds between refreshes."
)
@click.option("--count", type=click.IntRange(1), help="With --watch: stop after this many refreshes (default: Ctrl-C).")
@pass_state
def status(state: CliState, as_json: bool, watch: bool, interval: float, count: int | None) -> None:
    """Queue depth, delayed, in flight, oldest age, open dead letters, targets, workers, recent throughput.

    Exits 1 when a source (broker, database, Redis) could not be read, after showing what could be; with
    ``--watch``, as its last refresh.
    """
    clients = state.clients
    # On a terminal, --watch redraws one view in place; otherwise each refresh is printed (NDJSON with --json).
    live = Live(console=stdout, auto_refresh=False) if watch and not as_json and stdout.is_terminal else None
    last = None
    count = count if watch else 1  # --watch without --count: until Ctrl-C
    reading = contextlib.closing(StateReader(clients))  # its connections closed however the refreshes end
    with reading as reader, live or contextlib.nullcontext(), contextlib.suppress(KeyboardInterrupt):
        for refresh in itertools.count() if count is None else range(count):
            if refresh:
                time.sleep(interval)
            last = read_status(reader, JobStats(clients.redis, clients.keys))
            if live is not None:
                live.update(render(last), refresh=True)
            elif as_json:
                click.echo(json.dumps(last.as_json(), indent=None if watch else 2, default=str))
            else:
                stdout.print(render(last))
    if last is not None and last.state.errors:
        unread = sorted(last.state.errors.items())
        raise CliError("; ".join(f"{source} unavailable: {first_line(error)}" for source, error in unread))

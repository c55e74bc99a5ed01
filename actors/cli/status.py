"""``calsync status``: the pipeline at a glance for people without Grafana (a table, ``--json`` or ``--watch``).

It shows what the queue exporter exports (the same :class:`core.observability.readings.StatusReader`), plus recent
throughput from the per-minute outcome counters of :mod:`core.redis.stats`.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import click
from rich.console import Group, RenderableType
from rich.live import Live
from rich.table import Table
from rich.text import Text

from calsync.actors.cli.common import EXIT_UNAVAILABLE, CliState, first_line, pass_state, print_json, stdout
from calsync.core.model.vocabulary import Outcome
from calsync.core.observability.readings import Reading, StatusReader
from calsync.core.redis.pause import PauseState, PauseSwitch
from calsync.core.redis.stats import JobStats

THROUGHPUT_WINDOWS = (5, 60)
OUTCOMES = tuple(outcome.value for outcome in Outcome)


@dataclass(frozen=True)
class Status:
    """One reading plus recent job outcome counts per window (minutes) and the pause switch; None when Redis could
    not be read."""

    reading: Reading
    throughput: dict[int, Counter[str]] | None
    paused: PauseState | None = None

    def as_json(self) -> dict[str, Any]:
        """The document ``calsync status --json`` prints."""
        reading = self.reading
        doc: dict[str, Any] = {
            "at": dt.datetime.fromtimestamp(reading.at, dt.UTC).isoformat(timespec="seconds"),
            "queues": [q.as_json() for q in reading.queues] if reading.queues is not None else None,
            "dead_letters": None,
            "targets": None,
            "paused": self.paused.as_json() if self.paused is not None else None,
            "workers_active": reading.workers_active,
            "workers": [w.as_json() for w in reading.workers] if reading.workers is not None else None,
            "circuits": [c.as_json() for c in reading.circuits] if reading.circuits is not None else None,
            "throughput": None,
            "errors": reading.errors,
        }
        if reading.store is not None:
            doc.update(reading.store.as_json())
        if self.throughput is not None:
            doc["throughput"] = {f"last_{m}m": dict(sorted(c.items())) for m, c in self.throughput.items()}
        return doc


def read_status(reader: StatusReader, stats: JobStats) -> Status:
    """Read everything ``calsync status`` shows."""
    reading = reader.read()
    try:
        throughput = {minutes: stats.totals(minutes=minutes, now=reading.at) for minutes in THROUGHPUT_WINDOWS}
        paused = PauseSwitch(reader.runtime.redis, reader.keys).state()
    except Exception as exc:
        reading.errors.setdefault("redis", f"{type(exc).__name__}: {exc}")
        return Status(reading, None)
    return Status(reading, throughput, paused)


def format_age(seconds: float | None) -> str:
    """A short human age: 0s, 42s, 5m 03s, 2h 05m, 3d 04h."""
    if seconds is None:
        return "n/a"
    whole = int(seconds)
    if whole < 60:
        return f"{seconds:.0f}s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes}m {secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h {minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d {hours:02d}h"


def _count(value: int | None) -> str:
    return "n/a" if value is None else str(value)


def _table(title: str, *columns: str) -> Table:
    table = Table(title=title, title_justify="left")
    for index, column in enumerate(columns):
        table.add_column(column, justify="left" if index == 0 else "right")
    return table


def render(status: Status) -> RenderableType:
    """The human view: one small table per concern, then any source that could not be read."""
    reading = status.reading
    parts: list[RenderableType] = []
    when = dt.datetime.fromtimestamp(reading.at, dt.UTC).isoformat(timespec="seconds")
    workers = _count(reading.workers_active)
    parts.append(Text(f"calsync status at {when} — active workers: {workers}"))
    if status.paused is not None:
        holding = sum(1 for w in reading.workers or [] if w.paused)
        why = f" ({status.paused.reason})" if status.paused.reason else ""
        since = status.paused.as_json()["since"]
        parts.append(Text(f"PAUSED since {since} by {status.paused.by}{why}: {holding} of {workers} workers "
                          "holding; `calsync resume` to go on", style="yellow"))  # fmt: skip
    for unhealthy in reading.workers_unhealthy or []:
        parts.append(Text(f"worker {unhealthy.worker} is unhealthy: {unhealthy.threads_alive} of "
                          f"{unhealthy.threads} worker threads alive (the liveness probe restarts it)",
                          style="red"))  # fmt: skip
    if reading.queues is not None:
        queues = _table("queues", "queue", "ready", "delayed", "in flight", "oldest ready")
        for q in reading.queues:
            queues.add_row(
                q.queue, str(q.ready), _count(q.delayed), _count(q.inflight), format_age(q.oldest_age_seconds)
            )
        parts.append(queues)
    if reading.store is not None:
        store = reading.store
        total = sum(store.dead_letters_open.values())
        oldest = f"oldest {format_age(store.dead_letter_oldest_age_seconds)}" if total else "none"
        dlq = _table(f"open dead letters ({oldest})", "reason", "open")
        for reason, count in store.open_by_reason().items():
            dlq.add_row(reason, str(count))
        dlq.add_row("total", str(total), style="bold")
        parts.append(dlq)
        overdue = format_age(store.pending_oldest_age_seconds)
        targets = _table(f"sync targets (most overdue pending: {overdue})", "status", "targets")
        for target_status, count in store.targets.items():
            targets.add_row(target_status, str(count))
        parts.append(targets)
    if reading.circuits:
        circuits = _table("circuit breakers", "provider", "provider breaker", "blocked for", "accounts open",
                          "half-open", "e.g.")  # fmt: skip
        for c in reading.circuits:
            style = "red" if "open" in (c.state, c.accounts_state) else None
            circuits.add_row(c.provider, c.state.replace("_", "-"), format_age(c.blocked_for), str(c.accounts_open),
                             str(c.accounts_half_open), ", ".join(c.some_accounts), style=style)  # fmt: skip
        parts.append(circuits)
    if status.throughput is not None:
        columns = [f"last {m} min" for m in THROUGHPUT_WINDOWS]
        throughput = _table("job outcomes", "outcome", *columns)
        seen = set().union(*(c.keys() for c in status.throughput.values()))
        for outcome in [*OUTCOMES, *sorted(seen - set(OUTCOMES))]:
            throughput.add_row(outcome, *(str(status.throughput[m].get(outcome, 0)) for m in THROUGHPUT_WINDOWS))
        parts.append(throughput)
    for source, error in sorted(reading.errors.items()):
        parts.append(Text(f"{source} unavailable: {error}", style="red"))
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
    runtime = state.runtime
    reader = StatusReader(runtime)
    try:
        readings = _refreshes(reader, runtime.stats, interval, count if watch else 1)
        if watch and not as_json and stdout.is_terminal:
            last = _live(readings)
        else:
            last = _printed(readings, as_json=as_json, lines=watch)
    finally:
        reader.close()
    if last is not None and last.reading.errors:
        unread = "; ".join(f"{source} unavailable: {first_line(error)}"
                           for source, error in sorted(last.reading.errors.items()))  # fmt: skip
        click.echo(f"calsync: error: {unread}", err=True)
        sys.exit(EXIT_UNAVAILABLE)


def _refreshes(reader: StatusReader, stats: JobStats, interval: float, count: int | None) -> Iterator[Status]:
    """A reading, then one every ``interval`` seconds, ``count`` in all (None: until Ctrl-C)."""
    done = 0
    while True:
        yield read_status(reader, stats)
        done += 1
        if count is not None and done >= count:
            return
        time.sleep(interval)


def _printed(readings: Iterator[Status], *, as_json: bool, lines: bool) -> Status | None:
    """Each reading printed as it comes: a table, or a JSON document (``lines``: one per line, NDJSON)."""
    last = None
    try:
        for last in readings:
            if not as_json:
                stdout.print(render(last))
            elif lines:
                click.echo(json.dumps(last.as_json(), default=str))
            else:
                print_json(last.as_json())
    except KeyboardInterrupt:
        pass
    return last


def _live(readings: Iterator[Status]) -> Status | None:
    """On a terminal: one view, redrawn in place at each reading."""
    last = next(readings)
    with Live(render(last), console=stdout, auto_refresh=False) as live:
        try:
            for last in readings:
                live.update(render(last), refresh=True)
        except KeyboardInterrupt:
            pass
    return last

"""The tables ``calsync demo`` prints: live progress while syncing, then job outcomes, dead letters and calls."""

from __future__ import annotations

import shlex
import shutil
import sys
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.table import Table

from calsync.core.store.dead_letters import DeadLetter
from calsync.providers.memory_store import Call

_JOB_OUTCOMES = (
    ("success", "synced"),
    ("retry_scheduled", "retried (temporary failure)"),
    ("stale", "skipped as stale"),
    ("already_done", "skipped as already done"),
    ("lock_busy", "waited for a lock"),
    ("dead_lettered", "dead-lettered"),
)


def progress_table(by_status: Mapping[str, int], outcomes: Counter[str], dead: int) -> Table:
    """One row: targets by status, jobs done, retries scheduled and dead letters so far."""
    table = Table(title="calsync demo: syncing", title_justify="left")
    for column in ("pending", "synced", "deleted", "failed", "jobs done", "retries scheduled", "dead letters"):
        table.add_column(column, justify="right")
    table.add_row(
        *(str(by_status.get(s, 0)) for s in ("pending", "synced", "deleted", "failed")),
        str(sum(outcomes.values()) - outcomes.get("retry_scheduled", 0) - outcomes.get("lock_busy", 0)),
        str(outcomes.get("retry_scheduled", 0)),
        str(dead),
    )
    return table


def jobs_table(outcomes: Counter[str]) -> Table:
    """How the jobs ended, by outcome."""
    jobs = Table(title="jobs", title_justify="left")
    jobs.add_column("outcome")
    jobs.add_column("count", justify="right")
    for outcome, label in _JOB_OUTCOMES:
        jobs.add_row(label, str(outcomes.get(outcome, 0)))
    return jobs


def dead_letters_table(records: Iterable[DeadLetter]) -> Table:
    """The dead letters, as ``calsync dlq list`` shows them."""
    dlq = Table(title="dead letters (calsync dlq list)", title_justify="left")
    for column in ("id", "reason", "error", "attempts"):
        dlq.add_column(column)
    for record in records:
        dlq.add_row(str(record.id), record.reason, record.last_error[:70], str(record.attempts))
    return dlq


def provider_calls_table(
    memory_calls: Sequence[Call], google_log: Sequence[Mapping[str, Any]], ews_log: Sequence[Mapping[str, Any]]
) -> Table:
    """Calls each provider received and how many of them failed by injection (emulator request logs)."""
    calls = Table(title="provider calls made", title_justify="left")
    for column in ("provider", "calls", "failed (injected)"):
        calls.add_column(column)
    calls.add_row("memory", str(len(memory_calls)), str(sum(1 for c in memory_calls if c.error)))
    api = [r for r in google_log if r["path"].startswith("/calendar/")]
    calls.add_row("Google Calendar emulator", str(len(api)), str(sum(1 for r in api if (r["status"] or 0) >= 400)))
    soap = [r for r in ews_log if r.get("operation") not in (None, "token", "discovery")
            and not r["path"].startswith("/v1.0/")]  # fmt: skip
    calls.add_row("Exchange EWS emulator", str(len(soap)), str(sum(1 for r in soap if r.get("fault"))))
    rest = [r for r in ews_log if r["path"].startswith("/v1.0/")]
    calls.add_row("Exchange Graph emulator", str(len(rest)), str(sum(1 for r in rest if r.get("fault"))))
    return calls


def calsync_command() -> str:
    """How to call the ``calsync`` of this environment: the bare name when it is the one on PATH."""
    here = Path(sys.executable).parent / "calsync"
    found = shutil.which("calsync")
    if found and Path(found).resolve() == here.resolve():
        return "calsync"
    return shlex.quote(str(here)) if here.exists() else f"{shlex.quote(sys.executable)} -m calsync_emulators"


def inspect_commands(directory: Path, tenant: str, entity: str | None, dead_letter: str | None) -> list[str]:
    """The exact commands that show this run's data afterwards (its own data dir, not the default one)."""
    calsync = calsync_command()
    lines = [
        f"export CALSYNC_DATA_DIR={shlex.quote(str(directory))}   # this run's SQLite and embedded Redis",
        f"{calsync} dlq list   # the dead letters above, with reasons (--json: history, payload)",
    ]
    if dead_letter is not None:
        lines.append(f"{calsync} dlq show {shlex.quote(dead_letter)}")
    if entity is not None:
        lines.append(f"{calsync} events show {shlex.quote(entity)} --tenant {shlex.quote(tenant)}")
    lines.append(f"{calsync} accounts list --tenant {shlex.quote(tenant)}")
    return lines

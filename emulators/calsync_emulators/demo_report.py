"""The tables ``calsync demo`` prints: live progress while syncing, then job runs, dead letters and calls.

The progress line and the jobs table count the same things: job runs (``calsync_jobs_total``), each a delivery of
a job that ended with one outcome; "jobs finished" are the runs that ended their job, "runs again later" the rest.
"""

from __future__ import annotations

import shlex
import shutil
import sys
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.table import Table

from calsync.core.model.vocabulary import Outcome
from calsync.core.store.dead_letters import DeadLetter
from calsync.providers.memory_store import Call

# Every outcome a job run can have (core.model.vocabulary.Outcome), in two groups: the runs that finished their
# job, and the runs after which it runs again (a retry, a wait for the lock, a hold of traffic control). A job
# that was retried or waited ran more than once, so runs outnumber jobs.
_FINISHED = (
    (Outcome.SUCCESS, "synced"),
    (Outcome.STALE, "skipped as stale"),
    (Outcome.ALREADY_DONE, "skipped as already done"),
    (Outcome.DEAD_LETTERED, "dead-lettered"),
)
_AGAIN = (
    (Outcome.RETRY_SCHEDULED, "retried (temporary failure)"),
    (Outcome.LOCK_BUSY, "waited for a lock"),
    (Outcome.DEFERRED, "held by traffic control (limit, back-off, breaker)"),
)


def _count(outcomes: Counter[str], group: tuple[tuple[Outcome, str], ...]) -> int:
    return sum(outcomes.get(outcome.value, 0) for outcome, _label in group)


def progress_table(by_status: Mapping[str, int], outcomes: Counter[str], dead: int) -> Table:
    """One row: targets by status, job runs that finished their job or that run again later, dead letters."""
    table = Table(title="calsync demo: syncing", title_justify="left")
    for column in ("pending", "synced", "deleted", "failed", "jobs finished", "runs again later", "dead letters"):
        table.add_column(column, justify="right")
    table.add_row(
        *(str(by_status.get(s, 0)) for s in ("pending", "synced", "deleted", "failed")),
        str(_count(outcomes, _FINISHED)),
        str(_count(outcomes, _AGAIN)),
        str(dead),
    )
    return table


def jobs_table(outcomes: Counter[str]) -> Table:
    """Every job run by outcome: those that finished their job, those after which it ran again, and all runs."""
    jobs = Table(title="job runs (a retried or waiting job runs more than once)", title_justify="left")
    jobs.add_column("outcome")
    jobs.add_column("runs", justify="right")
    for outcome, label in _FINISHED:
        jobs.add_row(label, str(outcomes.get(outcome.value, 0)))
    jobs.add_row("jobs finished", str(_count(outcomes, _FINISHED)), style="bold", end_section=True)
    for outcome, label in _AGAIN:
        jobs.add_row(label, str(outcomes.get(outcome.value, 0)))
    known = {outcome.value for outcome, _label in (*_FINISHED, *_AGAIN)}
    for other in sorted(set(outcomes) - known):  # counted by a newer worker than this demo knows
        jobs.add_row(f"other ({other})", str(outcomes[other]))
    jobs.add_row("job runs in all", str(sum(outcomes.values())), style="bold")
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

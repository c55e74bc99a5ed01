"""The demo's numbers add up: its progress line's "jobs finished" is the jobs table's, and the table's rows add
up to every job run counted, whatever the outcome (a retry, a wait and a hold are runs too)."""

from __future__ import annotations

import io
import re
from collections import Counter

from rich.console import Console
from rich.table import Table

from calsync.core.model.vocabulary import Outcome
from calsync_emulators.demo_report import jobs_table, progress_table

# A run like the one of the finding: 28 runs, of which only 23 were in the table's rows.
OUTCOMES = Counter({"success": 14, "retry_scheduled": 4, "stale": 3, "already_done": 1, "lock_busy": 1,
                    "deferred": 4, "dead_lettered": 1})  # fmt: skip


def _rows(table: Table) -> list[list[str]]:
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(table)
    text = console.export_text().replace("┃", "│")  # header cells are drawn heavier
    return [[cell.strip() for cell in line.strip("│").split("│")] for line in text.splitlines() if line.count("│") >= 3]


def test_the_jobs_table_counts_every_run_and_its_rows_add_up() -> None:
    rows = {label: int(count) for label, count in _rows(jobs_table(OUTCOMES))[1:]}
    finished, total = rows.pop("jobs finished"), rows.pop("job runs in all")
    assert total == sum(OUTCOMES.values()) == sum(rows.values())
    assert finished == sum(OUTCOMES[o] for o in ("success", "stale", "already_done", "dead_lettered"))


def test_the_progress_line_says_what_the_jobs_table_says() -> None:
    [header, values] = _rows(progress_table({"synced": 5, "failed": 1}, OUTCOMES, 1))
    shown = dict(zip(header, map(int, values), strict=True))
    table = {label: int(count) for label, count in _rows(jobs_table(OUTCOMES))[1:]}
    assert shown["jobs finished"] == table["jobs finished"]
    assert shown["runs again later"] == table["job runs in all"] - table["jobs finished"]


def test_every_outcome_has_a_row() -> None:
    everything = Counter({outcome.value: 1 for outcome in Outcome})
    rows = dict(_rows(jobs_table(everything))[1:])
    assert int(rows["job runs in all"]) == len(Outcome) and not re.search(r"_", " ".join(rows))

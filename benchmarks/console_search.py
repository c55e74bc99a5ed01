"""What the console's events page costs on PostgreSQL as targets grow: its searches across tenants and one event's page.

    PYTHONPATH=. .venv/bin/python benchmarks/console_search.py [--sizes 100000,1000000] [--repeat 7]
        [--postgres-dsn DSN]

A fresh schema of ``--postgres-dsn``, migrated by calsync, is filled in bulk to each size of events in turn
(benchmarks/scale_fill.py: 3 targets per event, 100 tenants, N/10 dead letters), its targets' ``updated_at``
spread over a day (:func:`spread_updates`), then each read the page makes runs on calsync's own code
(core/store/job_lookup.py, core/console/target_history.py), one page of 51 as the page asks for: every tenant's
targets, each state's, an account's, a provider's, an event id's, one tenant's; the page after each (a keyset
cursor); a job id and a trace id looked up; one event's targets with their providers, attempts and history.
Each is the median of ``--repeat`` runs after a warm-up, in milliseconds; the schema is dropped at the end.
It is a benchmark, not a test: numbers depend on the machine (docs/notes/console-search.md).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import platform
import tempfile
from collections.abc import Callable
from pathlib import Path

from benchmarks.scale import median_ms
from benchmarks.scale_fill import fill
from benchmarks.support import private_database
from calsync.core.console import target_history
from calsync.core.store import job_lookup, targets
from calsync.core.store.database import Database
from calsync.core.store.job_lookup import TargetSearch
from calsync.core.store.migrate import migrate_to

PAGE = 51  # the console's 50 hits and one to know whether an older page exists
TENANT, ACCOUNT, EVENT = "tenant-1", "acc-100", "evt-101"  # a filled tenant, its first account, an event with a DLQ


def spread_updates(db: Database) -> None:
    """Targets updated over the last day, as a live system's are, rather than at the fill's one instant: with one
    ``updated_at`` for all, a page's keyset bound looks to the planner as if it left no row, and any index ordered
    by status and time (the console's search across tenants) seems as good as the tenant's own for a tenant's page.
    Then vacuumed (the update leaves a dead version of every target, newest in the indexes, for a first page to step
    over) and analyzed, so the planner knows."""
    spread = "updated_at - make_interval(secs => abs(hashtext(event_id || account_id)) %% 86400)"
    with db.engine.begin() as conn:
        conn.exec_driver_sql(f"UPDATE event_targets SET updated_at = {spread}")
    with db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("VACUUM ANALYZE event_targets")


SEARCHES = {
    "every tenant": TargetSearch(),
    "every tenant, pending": TargetSearch(state="pending"),
    "every tenant, deferred": TargetSearch(state="deferred"),
    "every tenant, dead-lettered": TargetSearch(state="dead-lettered"),
    "every tenant, synced": TargetSearch(state="synced"),
    "an account": TargetSearch(account_id=ACCOUNT),
    "a provider (memory)": TargetSearch(provider="memory"),
    "an event id": TargetSearch(entity_id=EVENT),
    "one tenant": TargetSearch(TENANT),
}


def _pages(db: Database, search: TargetSearch) -> tuple[Callable[[], object], Callable[[], object]]:
    """The first page of ``search``, and the one after it."""

    def first() -> list[targets.TargetRow]:
        with db.read() as conn:
            return job_lookup.search(conn, search, after=None, limit=PAGE)

    found = first()
    last = found[-1] if found else None

    def second() -> object:
        with db.read() as conn:
            after = (last.updated_at, last.event_id, last.account_id) if last else None
            return job_lookup.search(conn, search, after=after, limit=PAGE)

    return first, second


def _event_page(db: Database) -> object:
    with db.read() as conn:
        rows = targets.shown_targets(conn, TENANT, EVENT)
        job_lookup.providers_of(conn, {row.account_id for row in rows})
        job_lookup.attempts_of(conn, [row.job_id for row in rows if row.job_id])
        return target_history.history(conn, [row.key for row in rows], TENANT, EVENT, limit=50)


def _lookups(db: Database) -> dict[str, Callable[[], object]]:
    def job() -> object:
        with db.read() as conn:
            return job_lookup.find_job(conn, None, "job-dl-10")

    def trace() -> object:
        with db.read() as conn:
            return job_lookup.find_trace(conn, "trace-of-nothing", limit=PAGE)

    return {"a job id": job, "a trace id": trace, "an event's page": lambda: _event_page(db)}


def measure(db: Database, repeat: int) -> dict[str, float]:
    """Every read of the page, in milliseconds (median of ``repeat``)."""
    figures: dict[str, float] = {}
    for name, search in SEARCHES.items():
        first, second = _pages(db, search)
        figures[f"{name}: first page"] = median_ms(first, repeat)
        figures[f"{name}: next page"] = median_ms(second, repeat)
    for name, run in _lookups(db).items():
        figures[name] = median_ms(run, repeat)
    return figures


def main() -> None:
    """Fill, spread, measure at each size, print the table, drop the schema."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="100000,1000000", help="events at each step, ascending")
    parser.add_argument("--repeat", type=int, default=7, help="runs of each read per size (median)")
    parser.add_argument("--postgres-dsn", default="postgresql://postgres@127.0.0.1:5432/test")
    args = parser.parse_args()
    sizes = sorted(int(size) for size in args.sizes.split(","))
    print(f"calsync console search, {dt.date.today()}, {platform.node()}, sizes {sizes} events (3 targets each)")
    results = []
    with contextlib.ExitStack() as stack:
        scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="calsync-bench-console-")))
        db = Database(stack.enter_context(private_database("postgresql", args.postgres_dsn, scratch)))
        stack.callback(db.dispose)
        migrate_to(db)
        have = 0
        for size in sizes:
            fill(db, have=have, want=size)
            spread_updates(db)
            have = size
            results.append(measure(db, args.repeat))
            print(f"  measured at {size} events", flush=True)
    print(f"{'read (ms, median)':44}" + "".join(f"{size:>12,}" for size in sizes))
    for name in results[0]:
        print(f"{name:44}" + "".join(f"{figures[name]:12.2f}" for figures in results))


if __name__ == "__main__":
    main()

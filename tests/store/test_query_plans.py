"""Every hot query calsync issues reads what it needs of a large table through an index, never the whole table.

The schema is filled (benchmarks/scale_fill.py) and analyzed, so PostgreSQL's planner has the statistics of a
large table and picks an index when one fits. Each hot path runs through calsync's own code while the engine
records every statement it sends; each recorded statement is then run again under ``EXPLAIN (ANALYZE, FORMAT
JSON)`` with the parameters it was sent with, in a transaction rolled back. A plan fails the test, naming the path
and the statement, when it reads one of the growing tables (:data:`GROWING`):

- by a sequential scan;
- by a whole index (an index scan without an index condition, not stopped by a LIMIT): a count of every row;
- or through an index range it then filters, discarding more than :data:`DISCARDED` rows: the rows read grow
  with the table, not with the answer (an ``a IS NULL OR a < x`` filter, a page filtered by tenant).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from prometheus_client import generate_latest
from sqlalchemy import event

from benchmarks.console_search import spread_updates
from benchmarks.scale import invoke
from benchmarks.scale_fill import fill
from calsync.actors.cli.changes import show
from calsync.actors.cli.shell import CliState
from calsync.core.console import target_history
from calsync.core.drift import store as drift_store
from calsync.core.model.payload import idempotency_key, new_payload
from calsync.core.observability.exporter import exporter_registry
from calsync.core.observability.pipeline_state import StateReader
from calsync.core.producer.reconcile import requeue_lost
from calsync.core.store import dead_letters, idempotency, job_lookup, targets
from calsync.core.store.database import Database
from calsync.core.store.dead_letters import DeadLetterFilter
from calsync.core.store.job_lookup import TargetSearch
from calsync.core.store.pruning import Retention, prune
from calsync.core.store.targets import TargetKey
from calsync.core.worker.snapshot import load_snapshot
from tests.support import Pipeline

pytestmark = [pytest.mark.postgresql_only, pytest.mark.slow]

GROWING = frozenset({"events", "event_targets", "dead_letters", "idempotency_records", "webhook_deliveries"})
EVENTS = 20_000  # 60,000 targets: enough for the planner to prefer an index wherever one fits
DISCARDED = 50  # rows a scan may read and filter out (a key lookup's stale versions, a page's neighbours)
TENANT, EVENT, ACCOUNT = "tenant-1", "evt-1", "acc-100"  # a filled event and its first target's account
Statement = tuple[str, Any]


@contextlib.contextmanager
def recorded(db: Database) -> Iterator[list[Statement]]:
    """Every single statement ``db``'s engine sends while the block runs (batches of parameters left out)."""
    sent: list[Statement] = []

    def record(_conn: Any, _cursor: Any, statement: str, parameters: Any, _context: Any, executemany: bool) -> None:
        if not executemany and statement.lstrip().upper().startswith(("SELECT", "UPDATE", "DELETE", "INSERT")):
            sent.append((statement, parameters))

    event.listen(db.engine, "before_cursor_execute", record)
    try:
        yield sent
    finally:
        event.remove(db.engine, "before_cursor_execute", record)


def whole_reads(node: dict[str, Any], *, limited: bool = False) -> Iterator[str]:
    """How a plan (node, as EXPLAIN ANALYZE gives it) reads a growing table whole or filters an index range."""
    table = node.get("Relation Name")
    if table in GROWING:
        if node["Node Type"] == "Seq Scan":
            yield f"a sequential scan of {table}"
        elif "Index Cond" not in node and "Index Name" in node and not limited:
            yield f"all of {table} through {node['Index Name']}"
        elif node.get("Rows Removed by Filter", 0) > DISCARDED:
            yield f"{node['Rows Removed by Filter']} rows of {table} read and discarded by {node['Filter']}"
    for child in node.get("Plans", ()):
        yield from whole_reads(child, limited=limited or node["Node Type"] == "Limit")


def hot_paths(pipeline: Pipeline) -> dict[str, Callable[[], object]]:
    """What runs on every status reading, scrape, reconcile or housekeeping pass, lookup, DLQ or search page and job."""
    clients = pipeline.clients
    state = CliState()
    state.clients = clients
    payload = new_payload(tenant_id=TENANT, entity_id=EVENT, account_id=ACCOUNT, operation="update", version=1,
                          trace_id="plans")  # fmt: skip
    open_of_tenant = DeadLetterFilter(status="open", tenant_id=TENANT)

    def dlq_pages() -> None:
        with clients.db.read() as conn:
            first = dead_letters.page(conn, open_of_tenant, after_id=None, limit=51)
            dead_letters.page(conn, open_of_tenant, after_id=first[len(first) // 2].id, limit=51)

    def target_searches() -> None:  # GET /v1/events: each filter, a first page and the one after it
        since = dt.datetime.now(dt.UTC) - dt.timedelta(days=2)
        searches = [TargetSearch(TENANT), TargetSearch(TENANT, state="pending"), TargetSearch(TENANT, state="synced"),
                    TargetSearch(TENANT, state="deferred"), TargetSearch(TENANT, state="dead-lettered", since=since),
                    TargetSearch(TENANT, account_id=ACCOUNT, state="synced"), TargetSearch(TENANT, account_id=ACCOUNT),
                    TargetSearch(TENANT, entity_id=EVENT),
                    TargetSearch(TENANT, provider="memory", state="synced"),
                    # the console's, across tenants (migration 0014)
                    TargetSearch(), TargetSearch(state="pending"), TargetSearch(state="dead-lettered", since=since),
                    TargetSearch(account_id=ACCOUNT), TargetSearch(entity_id=EVENT),
                    TargetSearch(provider="memory", state="synced")]  # fmt: skip
        with clients.db.read() as conn:
            for search in searches:
                first = job_lookup.search(conn, search, after=None, limit=51)
                if first:
                    last = first[-1]
                    job_lookup.search(conn, search, after=(last.updated_at, last.event_id, last.account_id), limit=51)

    def job_lookups() -> None:  # GET /v1/jobs/{job_id}: a target's latest job, a dead letter's; a trace's
        with clients.db.read() as conn:
            job_lookup.find_job(conn, TENANT, "job-dl-10")
            job_lookup.find_job(conn, TENANT, "job-unknown")
            job_lookup.find_job(conn, None, "job-dl-10")  # the console's, any tenant's
            job_lookup.find_trace(conn, "trace-unknown", limit=51)

    def console_event_page() -> None:  # an event with a dead letter (job-dl-10): its targets, their history
        with clients.db.read() as conn:
            rows = targets.shown_targets(conn, TENANT, "evt-101")
            job_lookup.providers_of(conn, {row.account_id for row in rows})
            job_lookup.attempts_of(conn, ["job-dl-10", "job-unknown"])
            target_history.history(conn, [row.key for row in rows], TENANT, "evt-101", limit=50)

    def drift_sweep_reads() -> None:  # a sweep's targets (a full listing, then the changes), findings, the gauges
        with clients.db.read() as conn:
            drift_store.account_targets(conn, ACCOUNT, event_ids=None)
            drift_store.account_targets(conn, ACCOUNT, event_ids={EVENT}, external_ids=["ext-1-0"])
            drift_store.list_findings(conn, tenant_id=TENANT, kind=None, after_id=None, limit=51)
            drift_store.oldest_sweep(conn)

    def idempotency_lookup() -> None:
        with clients.db.read() as conn:
            idempotency.succeeded(conn, idempotency_key(TENANT, EVENT, ACCOUNT, "create", 1))

    def result_write() -> None:
        with clients.db.write() as conn:
            targets.record_synced(conn, TargetKey(TENANT, EVENT, ACCOUNT), version=9, external_id=None, etag=None,
                                  final_status="synced")  # fmt: skip
            idempotency.record_success(conn, payload.idempotency_key, job_id=payload.job_id, result={},
                                       ttl_seconds=60)  # fmt: skip

    return {
        "calsync status": lambda: StateReader(clients).store(time.time()),
        "exporter scrape": lambda: generate_latest(exporter_registry(StateReader(clients))),
        "reconcile pass": lambda: requeue_lost(clients, now=dt.datetime.now(dt.UTC)),
        "housekeeping pass": lambda: prune(clients.db, Retention.of(clients.settings)),
        "events show without --tenant": lambda: invoke(show, state, entity_id=EVENT, tenant=None, as_json=True),
        "events show --tenant": lambda: invoke(show, state, entity_id=EVENT, tenant=TENANT, as_json=True),
        "DLQ pages": dlq_pages,
        "target search pages": target_searches,
        "job lookups": job_lookups,
        "console event page": console_event_page,
        "drift sweep reads": drift_sweep_reads,
        "idempotency lookup": idempotency_lookup,
        "job snapshot read": lambda: load_snapshot(clients.db, clients.cipher, payload),
        "job result write": result_write,
    }


def test_no_hot_query_reads_a_growing_table_whole(pipeline: Pipeline) -> None:
    fill(pipeline.clients.db, have=0, want=EVENTS)
    db = pipeline.clients.db
    spread_updates(db)
    offenders = []
    for name, run in hot_paths(pipeline).items():
        with recorded(db) as sent:
            run()
        assert sent, f"{name} sent no statement"
        with db.engine.connect() as conn, conn.begin() as transaction:  # the writes explained are rolled back
            for statement, parameters in sent:
                explain = f"EXPLAIN (ANALYZE, FORMAT JSON) {statement}"
                [[explained]] = conn.exec_driver_sql(explain, parameters).all()
                offenders += [f"{name}: {read}\n  {statement}" for read in whole_reads(explained[0]["Plan"])]
            transaction.rollback()
    assert not offenders, "hot queries reading growing tables whole:\n" + "\n\n".join(offenders)

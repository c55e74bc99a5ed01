"""The console's dead-letter search: what ``q`` and ``provider`` match on both databases, and, on PostgreSQL with
100,000 records, that the error's text is found through its trigram index, never by reading every record."""

from __future__ import annotations

import datetime as dt
import hashlib
import time
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import ClauseElement, func, select, text

from calsync.core.store import accounts, dead_letters
from calsync.core.store.database import Database
from calsync.core.store.dead_letters import DeadLetterFilter, DeadLetterRecord
from calsync.core.store.schema import dead_letters as table

RECORDS = 100_000
# One tenant's open records, each with an error of its own (an md5), on 100 accounts and 5,000 events.
FILL = f"""
    INSERT INTO dead_letters (job_id, job_type, tenant_id, entity_id, account_id, attempts, reason, error_class,
        last_error, error_history, first_failed_at, failed_at, status, kind)
    SELECT 'job-' || i, 'sync_event', 'tenant-1', 'evt-' || (i % 5000), 'acc-' || (i % 100), 3, 'forbidden',
        'Forbidden', 'HTTP 403 from the provider: request ' || md5(i::text) || ' refused after ' || (i % 60) || ' s',
        '[]', now(), now(), 'open', 'job'
    FROM generate_series(1, {RECORDS}) AS i"""


def _record(job_id: str, last_error: str, account_id: str | None = None) -> DeadLetterRecord:
    now = dt.datetime.now(dt.UTC)
    return DeadLetterRecord(
        job_id=job_id, job_type="sync_event", message_id=None, queue="calendar", tenant_id="t", entity_id="e",
        account_id=account_id, idempotency_key=None, trace_id=None, payload={}, attempts=1, reason="forbidden",
        error_class="Forbidden", last_error=last_error, error_history=[], first_failed_at=now, failed_at=now,
    )  # fmt: skip


@pytest.mark.both_databases
def test_the_error_text_is_a_literal_case_insensitive_substring(db: Database) -> None:
    with db.write() as conn:
        memory = accounts.add_account(conn, tenant_id="t", provider="memory", address="a@b.c", credentials=None,
                                      options={}).id  # fmt: skip
        # The last as the store keeps an error with a NUL (PostgreSQL text cannot hold one).
        errors = ["Quota 100% used", "quota 1000 used", "a_b", "axb", "back\\slash", "nul \\0 here"]
        for n, error in enumerate(errors):
            dead_letters.insert(db, conn, _record(f"job-{n}", error, memory if n else None))

    def found(**flt: Any) -> list[int]:
        with db.read() as conn:
            return [int(r.job_id[4:]) for r in dead_letters.find(conn, DeadLetterFilter(**flt))]

    assert found(q="QUOTA") == [0, 1] and found(q="100%") == [0] and found(q="a_b") == [2]
    assert found(q="k\\s") == [4] and found(q="\x00") == [5] and found(q="%") == [0]
    assert found(provider="memory") == [1, 2, 3, 4, 5] and found(provider="google") == []


def _plan(db: Database, query: ClauseElement) -> tuple[dict[str, Any], float]:
    """The executed plan of ``query`` and how long it took, in ms."""
    compiled = query.compile(db.engine, compile_kwargs={"literal_binds": True})
    with db.read() as conn:
        started = time.perf_counter()
        [[plan]] = conn.execute(text(f"EXPLAIN (ANALYZE, FORMAT JSON) {compiled}")).all()
        return plan[0]["Plan"], (time.perf_counter() - started) * 1000


def _nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("Plans", ()):
        yield from _nodes(child)


@pytest.fixture
def filled(db: Database) -> Database:
    """``db`` with 100,000 open dead letters of one tenant, each with an error of its own, analyzed."""
    with db.write() as conn:
        conn.execute(text(FILL))
        conn.execute(text("ANALYZE dead_letters"))
    return db


@pytest.mark.postgresql_only
@pytest.mark.slow
def test_the_search_reads_its_index_at_100k_records(filled: Database) -> None:
    needle = hashlib.md5(b"10").hexdigest()[:12]  # one record's
    searches = {
        "list page": dead_letters.DeadLetterFilter(tenant_id="tenant-1", q=needle),
        "list page, any tenant": dead_letters.DeadLetterFilter(q=needle),
    }
    for name, flt in searches.items():
        page = select(table).where(*flt.clauses()).order_by(table.c.id.desc()).limit(51)
        count = select(func.count(), func.max(table.c.id)).where(*flt.clauses())  # dead_letters.tally
        for what, query in (("page", page), ("count", count)):
            plan, took = _plan(filled, query)
            nodes = list(_nodes(plan))
            assert all(n["Node Type"] != "Seq Scan" for n in nodes), name
            assert any(n.get("Index Name") == "ix_dead_letters_error_search" for n in nodes), name
            print(f"{name}, {what}: {took:.1f} ms")  # docs/notes/console-dead-letters.md
    with filled.read() as conn:
        [hit] = dead_letters.page(conn, searches["list page"], after_id=None, limit=51, newest_first=True)
        assert hit.job_id == "job-10"
        same = dead_letters.same_target(conn, hit)
    assert len(same) == 19 and {r.entity_id for r in same} == {"evt-10"}
    target = select(table).where(table.c.account_id == "acc-10", table.c.entity_id == "evt-10", table.c.id != hit.id)
    plan, took = _plan(filled, target.order_by(table.c.id.desc()).limit(20))
    assert {n.get("Index Name") for n in _nodes(plan)} & {"ix_dead_letters_target"}
    print(f"a target's other records: {took:.1f} ms")

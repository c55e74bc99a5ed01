"""Keyset pages over ``dead_letters`` for the HTTP API: a filter, an id to continue after, a page size.

Pages run by id (insertion order, which is failure order up to concurrent writers), so a page stays
correct while records are added or closed between requests.
"""

from __future__ import annotations

from sqlalchemy import Connection, RowMapping, select

from calsync.core.store.dead_letters import DeadLetter, DeadLetterFilter
from calsync.core.store.schema import dead_letters as d


def page(conn: Connection, flt: DeadLetterFilter, *, after_id: int | None, limit: int) -> list[DeadLetter]:
    """Up to ``limit`` records matching the filter with an id above ``after_id``, by id."""
    query = select(d).where(*flt.clauses())
    if after_id is not None:
        query = query.where(d.c.id > after_id)
    rows = conn.execute(query.order_by(d.c.id).limit(limit)).mappings()
    return [_record(row) for row in rows]


def _record(row: RowMapping) -> DeadLetter:
    return DeadLetter(**{column.name: row[column.name] for column in d.columns})


def get_of_tenant(conn: Connection, tenant_id: str, record_id: int) -> DeadLetter | None:
    """One record, only if it belongs to the tenant (another tenant's record reads as absent)."""
    row = conn.execute(select(d).where(d.c.id == record_id, d.c.tenant_id == tenant_id)).mappings().first()
    return None if row is None else _record(row)

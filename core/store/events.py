"""Repository of ``events``: the business state of each calendar event and its monotonic version."""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Mapping
from typing import Any

from sqlalchemy import Connection, bindparam, select, update

from calsync.core.model.calendar import BusinessStatus, EventState, SendUpdates
from calsync.core.model.change import EventFields
from calsync.core.store.database import upsert_insert
from calsync.core.store.schema import events


def _instant(value: str, all_day: bool) -> dt.date | dt.datetime:
    return dt.date.fromisoformat(value) if all_day else dt.datetime.fromisoformat(value)


# The columns an EventState takes as stored; start, end and attendees are converted.
_AS_STORED = ("id", "tenant_id", "version", "title", "time_zone", "all_day", "location", "description", "status",
              "send_updates")  # fmt: skip


def event_from_row(row: Mapping[Any, Any]) -> EventState:
    """Rebuild the typed event state from its stored row."""
    start, end = (_instant(row[column], row["all_day"]) for column in ("start_at", "end_at"))
    as_stored = {name: row[name] for name in _AS_STORED}
    return EventState(**as_stored, start=start, end=end, attendees=tuple(row["attendees"] or ()))


def _columns(fields: EventFields) -> dict[str, Any]:
    values = fields.model_dump(exclude={"start", "end"})
    return {**values, "start_at": fields.start.isoformat(), "end_at": fields.end.isoformat(),
            "attendees": list(fields.attendees)}  # fmt: skip


def fields_of(state: EventState) -> EventFields:
    """The business fields of a stored event, comparable with a submitted change.

    Not validated again: an event stored under older rules (a longer title, say) still compares, as unequal.
    """
    return EventFields.model_construct(**{name: getattr(state, name) for name in EventFields.model_fields})


_GET = select(events).where(events.c.tenant_id == bindparam("k_tenant"), events.c.id == bindparam("k_event"))
_LOCK = _GET.with_for_update()  # SQLite has no FOR UPDATE (SQLAlchemy leaves it out): its writers take turns


def get_event(conn: Connection, tenant_id: str, event_id: str, *, lock: bool = False) -> EventState | None:
    """The current state of an event of this tenant, or None; with ``lock``, the row locked until the transaction
    ends: the writers of one event take turns.

    On PostgreSQL a concurrent writer waits for the lock until the first commits, then reads the committed row
    (READ COMMITTED), so it decides against the newest version instead of a stale one.
    """
    row = conn.execute(_LOCK if lock else _GET, {"k_tenant": tenant_id, "k_event": event_id}).mappings().first()
    return event_from_row(row) if row else None


def find_event_tenants(conn: Connection, event_id: str) -> list[str]:
    """Tenants having an event with this id (ids are unique per tenant only)."""
    return list(conn.execute(select(events.c.tenant_id).where(events.c.id == event_id)).scalars())


# Constant statements, values passed as parameters: SQLAlchemy caches their compiled form. Built per call with
# .values(...), the insert's cache key alone cost a one-account submit_change a third of its CPU.
@functools.cache
def _insert(dialect: str) -> Any:
    insert = upsert_insert(events, dialect).on_conflict_do_nothing(index_elements=[events.c.tenant_id, events.c.id])
    return insert.returning(events.c.version)  # a row when inserted: SQLAlchemy keeps no rowcount of an INSERT


def insert_event(
    conn: Connection, tenant_id: str, event_id: str, fields: EventFields, send_updates: SendUpdates
) -> bool:
    """Create version 1 of an event; False when the event exists (a concurrent create committed first).

    On PostgreSQL the insert waits for a concurrent uncommitted create of the same id and then does nothing,
    where a plain insert would fail on the primary key.
    """
    now = dt.datetime.now(dt.UTC)
    row = {"tenant_id": tenant_id, "id": event_id, "version": 1, "send_updates": send_updates,
           "status": "confirmed", "created_at": now, "updated_at": now, **_columns(fields)}  # fmt: skip
    return conn.execute(_insert(conn.dialect.name), row).first() is not None


def bump_event(
    conn: Connection,
    tenant_id: str,
    event_id: str,
    *,
    status: BusinessStatus,
    send_updates: SendUpdates,
    fields: EventFields | None = None,
) -> int:
    """Write a new version atomically (``version = version + 1``) and return it."""
    params: dict[str, Any] = {"k_tenant": tenant_id, "k_event": event_id, "status": status,
                              "send_updates": send_updates, "updated_at": dt.datetime.now(dt.UTC)}  # fmt: skip
    if fields is not None:
        params.update(_columns(fields))
    return int(conn.execute(_BUMP, params).scalar_one())


# The other columns it sets come from parameters named after them (SQLAlchemy adds those to the SET clause).
_BUMP = (
    update(events)
    .where(events.c.tenant_id == bindparam("k_tenant"), events.c.id == bindparam("k_event"))
    .values(version=events.c.version + 1)
    .returning(events.c.version)
)

"""Repository of ``dead_letters``: jobs that failed for good, kept until replayed or discarded.

Unlike Dramatiq's own XQ (seven days, lost with a non-persistent Redis), these rows hold everything
needed to understand and replay a job: the original payload, the attempt count, the last error and
a short history of every attempt.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Final, Literal

from sqlalchemy import ColumnElement, Connection, Integer, Select, String, func, select, update
from sqlalchemy.sql.elements import SQLColumnExpression

from calsync.core.model.vocabulary import DeadLetterCause, DeadLetterKind, cause_of_reason
from calsync.core.store.database import Database, given_equal, upsert_insert
from calsync.core.store.schema import dead_letters as d
from calsync.core.store.schema import json_ready, provider_accounts

DeadLetterStatus = Literal["open", "replayed", "discarded"]

_INT_RANGE: Final = (-(2**31), 2**31 - 1)  # PostgreSQL integer
_FITTED_PAYLOAD_LIMIT: Final = 16 * 1024  # characters of a degraded record's payload, as JSON text


@dataclass(frozen=True)
class DeadLetterRecord:
    """What the worker records about a job that failed for good: enough to understand and replay it."""

    job_id: str
    job_type: str
    message_id: str | None
    queue: str | None
    tenant_id: str | None
    entity_id: str | None
    account_id: str | None
    idempotency_key: str | None
    trace_id: str | None
    payload: Any
    attempts: int
    reason: str
    error_class: str
    last_error: str
    error_history: list[dict[str, Any]]
    first_failed_at: dt.datetime
    failed_at: dt.datetime
    kind: DeadLetterKind = "job"
    # A quarantined message's raw body (size-capped), its full size, and where it arrived.
    raw_body: bytes | None = None
    raw_size: int | None = None
    origin: dict[str, Any] | None = None

    @property
    def cause(self) -> DeadLetterCause:
        """Why the job was dead-lettered, as its ``reason`` states it."""
        return cause_of_reason(self.reason)


@dataclass(frozen=True, kw_only=True)
class DeadLetter(DeadLetterRecord):
    """One stored dead letter: the record, and what operators did with it since."""

    id: int
    status: DeadLetterStatus
    replayed_at: dt.datetime | None
    replay_job_id: str | None
    discarded_at: dt.datetime | None
    note: str | None

    def as_json(self) -> dict[str, Any]:
        """JSON-ready form for ``calsync dlq list/show --json``."""
        doc = {"id": self.id, **asdict(self), "cause": self.cause.value}
        raw = doc.pop("raw_body")
        doc["raw_body_base64"] = None if raw is None else base64.b64encode(raw).decode()
        doc["raw_body_text"] = None if raw is None else raw.decode("utf-8", "backslashreplace")
        return json_ready(doc)


@dataclass(frozen=True)
class DeadLetterFilter:
    """Which records an operator means (all given conditions must hold).

    ``provider`` is the provider of the record's account (dead letters hold no provider of their own: a record
    without an account never matches one). ``q`` is a case-insensitive substring of the last error, taken
    literally (``%`` and ``_`` are no wildcards): on PostgreSQL a trigram index on ``lower(last_error)`` answers it
    (migration 0015, for three characters or more); on SQLite it is a LIKE over the filtered rows. ``up_to_id``
    keeps to the records that existed when it was taken (:func:`tally`): a bulk action's confirmed set.
    """

    status: DeadLetterStatus | None = "open"
    tenant_id: str | None = None
    account_id: str | None = None
    entity_id: str | None = None
    reason: str | None = None
    error_class: str | None = None
    job_type: str | None = None
    kind: DeadLetterKind | None = None
    provider: str | None = None
    q: str | None = None
    up_to_id: int | None = None

    def clauses(self) -> list[ColumnElement[bool]]:
        """SQL conditions for this filter."""
        # A field named after a column of the table asks for that value; the others are conditions of their own.
        found = given_equal(*((d.c[f.name], getattr(self, f.name)) for f in fields(self) if f.name in d.c))
        if self.provider is not None:
            accounts_of = select(provider_accounts.c.id).where(provider_accounts.c.provider == self.provider)
            found.append(d.c.account_id.in_(accounts_of))
        if self.q:
            found.append(error_search(self.q))
        if self.up_to_id is not None:
            found.append(d.c.id <= self.up_to_id)
        return found


def error_search(text: str) -> ColumnElement[bool]:
    """Records whose last error contains ``text``, ignoring case: ``lower(last_error) LIKE '%text%'``, the
    expression of the trigram index ``ix_dead_letters_error_search`` (migration 0015)."""
    literal = _clean(text).lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    lowered: SQLColumnExpression[str] = func.lower(d.c.last_error)
    return lowered.like(f"%{literal}%", escape="\\")


def insert(db: Database, conn: Connection, record: DeadLetterRecord) -> None:
    """Store a dead letter; a second record for the same job id (a duplicate delivery) is ignored."""
    values = {f.name: getattr(record, f.name) for f in fields(DeadLetterRecord)}
    conn.execute(upsert_insert(d, db.dialect).on_conflict_do_nothing().values(status="open", **values))


def fitted(record: DeadLetterRecord, why: str) -> DeadLetterRecord:
    """The record cut to what the table can hold (strings to their column, integers to ``integer``,
    the payload to bounded JSON text), for when storing it as it is failed for a data reason."""
    changes: dict[str, Any] = {}
    for column in d.columns:
        value = getattr(record, column.name, None)
        if isinstance(column.type, String) and isinstance(value, str):
            changes[column.name] = _clean(value)[: column.type.length]
        elif isinstance(column.type, Integer) and isinstance(value, int):
            changes[column.name] = min(max(value, _INT_RANGE[0]), _INT_RANGE[1])
    text = json.dumps(record.payload, default=repr)
    changes["payload"] = {"degraded": True, "json": text[:_FITTED_PAYLOAD_LIMIT], "size": len(text)}
    changes["error_history"] = [{k: _clean(str(v))[:1000] for k, v in e.items()} for e in record.error_history[-5:]]
    origin = json.dumps(record.origin, default=repr)
    changes["origin"] = json.loads(origin) if len(origin) <= _FITTED_PAYLOAD_LIMIT else {"degraded": True}
    changes["last_error"] = _clean(f"{record.last_error[:4000]} (stored degraded: {why[:500]})")
    return replace(record, **changes)


def _clean(text: str) -> str:
    # PostgreSQL text cannot hold NUL characters.
    return text.replace("\x00", "\\0")


def records(conn: Connection, query: Select[Any]) -> list[DeadLetter]:
    """The dead letters ``query`` (a ``select`` of the whole table) reads, in its order."""
    return [DeadLetter(**row) for row in conn.execute(query).mappings()]


def get(conn: Connection, record_id: int, *, tenant_id: str | None = None) -> DeadLetter | None:
    """One record by id; with ``tenant_id``, only if it belongs to that tenant (another tenant's record reads as
    absent)."""
    mine = DeadLetterFilter(status=None, tenant_id=tenant_id).clauses()
    row = conn.execute(select(d).where(d.c.id == record_id, *mine)).mappings().first()
    return None if row is None else DeadLetter(**row)


def find(conn: Connection, flt: DeadLetterFilter, *, limit: int | None = None) -> list[DeadLetter]:
    """Records matching the filter, oldest failure first."""
    return records(conn, select(d).where(*flt.clauses()).order_by(d.c.failed_at, d.c.id).limit(limit))


def page(
    conn: Connection, flt: DeadLetterFilter, *, after_id: int | None, limit: int, newest_first: bool = False
) -> list[DeadLetter]:
    """Up to ``limit`` records matching the filter past ``after_id`` (an id above it; with ``newest_first``, below
    it, newest first): keyset pages for the HTTP API and the console, which stay correct while records are added or
    closed between requests. Read through ``ix_dead_letters_tenant_status`` for a tenant's, else the primary key."""
    query = select(d).where(*flt.clauses())
    if newest_first:
        query = query.where(*([] if after_id is None else [d.c.id < after_id])).order_by(d.c.id.desc())
    else:
        query = query.where(d.c.id > (after_id or 0)).order_by(d.c.id)
    return records(conn, query.limit(limit))


def tally(conn: Connection, flt: DeadLetterFilter) -> tuple[int, int]:
    """How many records match the filter now, and the highest id among them (0 for none): what a bulk action's
    confirmation states, and the bound that keeps it to those records (a later one has a higher id)."""
    count, highest = conn.execute(select(func.count(), func.max(d.c.id)).where(*flt.clauses())).one()
    return int(count), int(highest or 0)


def same_target(conn: Connection, record: DeadLetter, *, limit: int = 20) -> list[DeadLetter]:
    """The other records of ``record``'s target (tenant, event, account), newest first: its earlier failures and any
    later one. Read through ``ix_dead_letters_target`` (migration 0015); none for a record without a target."""
    if record.account_id is None or record.entity_id is None:
        return []
    where = (d.c.account_id == record.account_id, d.c.entity_id == record.entity_id, d.c.tenant_id == record.tenant_id)
    return records(conn, select(d).where(*where, d.c.id != record.id).order_by(d.c.id.desc()).limit(limit))


def _close(conn: Connection, record_id: int, **values: Any) -> bool:
    """Close an open record (``values``: how); False if it was not open."""
    return bool(conn.execute(update(d).where(d.c.id == record_id, d.c.status == "open").values(**values)).rowcount)


def mark_replayed(conn: Connection, record_id: int, *, replay_job_id: str) -> bool:
    """Close an open record as replayed under a new job id; False if it was not open."""
    return _close(conn, record_id, status="replayed", replayed_at=dt.datetime.now(dt.UTC), replay_job_id=replay_job_id)


def mark_discarded(conn: Connection, record_id: int, *, note: str | None) -> bool:
    """Close an open record without replaying it; False if it was not open."""
    return _close(conn, record_id, status="discarded", discarded_at=dt.datetime.now(dt.UTC), note=note)


def open_counts(conn: Connection) -> dict[tuple[str, str], int]:
    """Open records by (job_type, reason)."""
    query = (
        select(d.c.job_type, d.c.reason, func.count()).where(d.c.status == "open").group_by(d.c.job_type, d.c.reason)
    )
    return {(job_type, reason): int(n) for job_type, reason, n in conn.execute(query).all()}


def oldest_open_failed_at(conn: Connection) -> dt.datetime | None:
    """When the oldest still-open record failed."""
    return conn.execute(select(func.min(d.c.failed_at)).where(d.c.status == "open")).scalar()

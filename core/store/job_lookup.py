"""A job by its id, and targets by state, account, event, provider and time: what the HTTP API's
``GET /v1/jobs/{job_id}`` and ``GET /v1/events`` read for one tenant, and the console's events page for every tenant,
each through an index (migrations 0012 and 0014).

A job is known by id while it is its target's latest job (``event_targets.job_id``, written by the intake, a DLQ
replay and the reconciler) or while its dead letter is kept (``dead_letters.job_id``). A job superseded by a newer
one of its target (a later change, a coalesced edit) or made by the worker itself (a repair sync, a delete's
verification) is not found: its target's newest job says what became of the change.

The search reads one range of an index per sync status, newest ``updated_at`` first, and merges them: a state is a
status (and, for a pending target, its wait reason), so every query is an equality prefix of
``ix_event_targets_tenant_search`` or, with an account, ``ix_event_targets_account_search``, then a keyset range.
Without a tenant (the console's operators see every tenant) the same ranges are read from
``ix_event_targets_status_search`` (migration 0014); an event id without a tenant is first read as the tenants having
such an event (``ix_events_id``), so its targets are primary-key ranges. A provider is a semi-join with its accounts
(the tenant's through ``ix_provider_accounts_tenant``; every tenant's read whole, a small table): the ranges are read
in index order and the planner probes each target's account, so without a tenant or account a page of a rare
provider reads as many targets as lie between its hits.

The keyset ``(updated_at, event_id, account_id)`` is unique across tenants too: an account belongs to one tenant.

A trace id is not stored with a target (the trace of a request lives in its logs and in the jobs' payloads on the
queue): the one place the database keeps it is a dead letter's ``trace_id`` (``ix_dead_letters_trace``, migration
0014), so a trace is found once one of its jobs failed for good or was cancelled (:func:`find_trace`).
"""

from __future__ import annotations

import datetime as dt
import heapq
import itertools
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from sqlalchemy import Column, ColumnElement, Connection, literal, select, true, tuple_

from calsync.core.model.calendar import ProviderName
from calsync.core.model.vocabulary import JobState, SyncStatus
from calsync.core.store import dead_letters, events
from calsync.core.store.database import given_equal
from calsync.core.store.dead_letters import DeadLetter
from calsync.core.store.schema import dead_letters as d
from calsync.core.store.schema import event_targets as t
from calsync.core.store.schema import provider_accounts as a
from calsync.core.store.targets import TargetRow

Keyset = tuple[dt.datetime, str, str]  # (updated_at, event_id, account_id) of the last target of a page

_PENDING_WAIT: dict[JobState, ColumnElement[bool]] = {
    "pending": t.c.wait_reason.is_(None),
    "retrying": t.c.wait_reason == "retry",
    "deferred": t.c.wait_reason.is_not(None) & (t.c.wait_reason != "retry"),
}
# The sync statuses each state reads, with what it asks of the wait reason (true(): nothing, dropped from the SQL).
_RANGES: dict[JobState | None, tuple[tuple[SyncStatus, ColumnElement[bool]], ...]] = {
    **{state: (("pending", wait),) for state, wait in _PENDING_WAIT.items()},
    "synced": (("synced", true()), ("deleted", true())),
    "dead-lettered": (("failed", true()),),
    None: (("pending", true()), ("synced", true()), ("deleted", true()), ("failed", true())),
}


def state_of(row: TargetRow) -> JobState:
    """What the target's job is doing, from its status and (pending) wait reason."""
    if row.status == "failed":
        return "dead-lettered"
    if row.status != "pending":
        return "synced"
    waiting = row.waiting
    return "pending" if waiting is None else "retrying" if waiting == "retry" else "deferred"


@dataclass(frozen=True)
class FoundJob:
    """A job of the tenant: its target (while it is the target's latest job) and its dead letter (if it has one)."""

    job_id: str
    target: TargetRow | None
    dead_letter: DeadLetter | None

    @property
    def state(self) -> JobState:
        """The job's state: its target's while it is the latest job; dead-lettered once only its record says so."""
        return state_of(self.target) if self.target is not None else "dead-lettered"


def find_job(conn: Connection, tenant_id: str | None, job_id: str) -> FoundJob | None:
    """The job ``job_id`` of the tenant (of any tenant when None: an operator's), or None (another tenant's job reads
    as absent). Job ids are unique (uuid4), so a job id names at most one target and one dead letter."""
    of_target = select(t).where(t.c.job_id == job_id, *given_equal((t.c.tenant_id, tenant_id)))
    of_record = select(d).where(d.c.job_id == job_id, *given_equal((d.c.tenant_id, tenant_id)))
    target, record = (conn.execute(query).mappings().first() for query in (of_target, of_record))
    if target is None and record is None:
        return None
    return FoundJob(job_id, TargetRow(**target) if target else None, DeadLetter(**record) if record else None)


def _by_id(conn: Connection, key: Column[str], value: Column[Any], ids: Collection[str]) -> dict[str, Any]:
    # ``value`` of the rows whose ``key`` is among ``ids``, by key (no query for none).
    return dict(conn.execute(select(key, value).where(key.in_(list(ids)))).all()) if ids else {}


def attempts_of(conn: Connection, job_ids: Collection[str]) -> dict[str, int]:
    """The attempts the dead letters of ``job_ids`` record, by job id (``dead_letters.job_id``, unique)."""
    return _by_id(conn, d.c.job_id, d.c.attempts, job_ids)


def providers_of(conn: Connection, account_ids: Collection[str]) -> dict[str, ProviderName]:
    """The provider of each of ``account_ids`` that exists, by account id (the primary key)."""
    return _by_id(conn, a.c.id, a.c.provider, account_ids)


def find_trace(conn: Connection, trace_id: str, *, limit: int) -> list[DeadLetter]:
    """Up to ``limit`` dead letters of the trace ``trace_id`` (of any tenant), newest first, through
    ``ix_dead_letters_trace``: the one place a trace id is stored (see the module's docstring)."""
    return dead_letters.records(conn, select(d).where(d.c.trace_id == trace_id).order_by(d.c.id.desc()).limit(limit))


@dataclass(frozen=True)
class TargetSearch:
    """Which targets (every condition given must hold): of one tenant, or of every tenant when ``tenant_id`` is None
    (an operator's search); ``since`` inclusive, ``until`` exclusive."""

    tenant_id: str | None = None
    state: JobState | None = None
    account_id: str | None = None
    entity_id: str | None = None
    provider: ProviderName | None = None
    since: dt.datetime | None = None
    until: dt.datetime | None = None


def _conditions(conn: Connection, search: TargetSearch) -> list[ColumnElement[bool]] | None:
    """The conditions every range shares; None when no target can match (no event of that id)."""
    where = given_equal((t.c.tenant_id, search.tenant_id), (t.c.account_id, search.account_id))
    if search.entity_id is not None:
        where.append(t.c.event_id == search.entity_id)
        if search.tenant_id is None:  # primary-key ranges: the tenants having such an event (ix_events_id)
            tenants = events.find_event_tenants(conn, search.entity_id)
            if not tenants:
                return None
            where.append(t.c.tenant_id.in_(tenants))
    if search.provider is not None:  # the accounts of that provider (the tenant's: ix_provider_accounts_tenant)
        of_provider = select(a.c.id).where(a.c.provider == search.provider)
        if search.tenant_id is not None:
            of_provider = of_provider.where(a.c.tenant_id == search.tenant_id)
        where.append(t.c.account_id.in_(of_provider.scalar_subquery()))
    if search.since is not None:
        where.append(t.c.updated_at >= search.since)
    if search.until is not None:
        where.append(t.c.updated_at < search.until)
    return where


def keyset_json(row: TargetRow) -> list[str]:
    """The keyset of ``row`` as a page's cursor carries it: ``[updated_at (ISO 8601), event_id, account_id]``."""
    return [row.updated_at.isoformat(), row.event_id, row.account_id]


def keyset_of(key: Any) -> Keyset:
    """The keyset :func:`keyset_json` made; ValueError or TypeError for anything else (a forged cursor's)."""
    updated, event_id, account_id = key  # a list of three, else ValueError or TypeError
    if not all(isinstance(part, str) for part in key):
        raise TypeError("not a keyset")
    at = dt.datetime.fromisoformat(updated)
    if at.utcoffset() is None:
        raise ValueError("a naive time")
    return at, event_id, account_id


def search(conn: Connection, query: TargetSearch, *, after: Keyset | None, limit: int) -> list[TargetRow]:
    """Up to ``limit`` targets matching ``query`` older than ``after`` (a page's last), newest ``updated_at`` first:
    keyset pages that stay correct while targets change between requests (a target that changes moves to the
    front, and a page already read does not show it again)."""
    where = _conditions(conn, query)
    if where is None:
        return []
    if after is not None:
        keyset = (t.c.updated_at, t.c.event_id, t.c.account_id)
        bound = (literal(value, column.type) for value, column in zip(after, keyset, strict=True))
        where.append(tuple_(*keyset) < tuple_(*bound))
    order = (t.c.updated_at.desc(), t.c.event_id.desc(), t.c.account_id.desc())
    ranges: list[Iterator[TargetRow]] = []
    for status, wait in _RANGES[query.state]:
        statement = select(t).where(*where, t.c.status == status, wait).order_by(*order).limit(limit)
        ranges.append(iter([TargetRow(**row) for row in conn.execute(statement).mappings()]))
    merged = heapq.merge(*ranges, key=attrgetter("updated_at", "event_id", "account_id"), reverse=True)
    return list(itertools.islice(merged, limit))

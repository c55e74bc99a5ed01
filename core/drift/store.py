"""Repository of drift detection: the tenants' policies, the accounts' sweep state, the findings, and a target's
last verification (core/store/schema.py, migration 0011).

The first five functions are what the CLI, the HTTP API and the exporter read and write; the rest are the sweep's
and the scheduler's. A sweep is claimed by moving ``next_sweep_at`` forward in the statement that picks it (rows
locked with ``SKIP LOCKED`` on PostgreSQL; one statement on SQLite, whose writers take turns), so two workers
never both enqueue the same account's sweep.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Collection, Iterable
from dataclasses import asdict, dataclass
from typing import Any, cast

from sqlalchemy import Connection, and_, bindparam, func, insert, literal, select, update

from calsync.core.drift.settings import DEFAULT_DRIFT_INTERVAL
from calsync.core.model.calendar import EventState
from calsync.core.model.drift import DEFAULT_DRIFT_POLICY, DRIFT_POLICIES, DriftAction, DriftKind, DriftPolicy
from calsync.core.store.database import upsert_insert
from calsync.core.store.events import event_from_row
from calsync.core.store.schema import drift_findings as f
from calsync.core.store.schema import drift_policies as p
from calsync.core.store.schema import drift_state as s
from calsync.core.store.schema import event_targets as t
from calsync.core.store.schema import events as ev
from calsync.core.store.schema import json_ready
from calsync.core.store.schema import provider_accounts as a
from calsync.core.store.targets import BY_KEY, TargetKey, TargetRow, key_params, update_target


@dataclass(frozen=True)
class Finding:
    """One drift a sweep found, and what it did about it (a row of ``drift_findings``)."""

    id: int
    tenant_id: str
    account_id: str
    event_id: str | None  # None for an unknown_item no target owns
    external_id: str
    kind: DriftKind
    action: DriftAction
    found_at: dt.datetime

    def as_json(self) -> dict[str, Any]:
        """JSON-ready form (``calsync drift list``, ``GET /v1/drift/findings``)."""
        return json_ready(asdict(self))


#: Statements a sweep runs every time, built once (building one costs more CPU than SQLite running it).
_POLICY = select(p.c.policy).where(p.c.tenant_id == bindparam("k_tenant"))
_STATE = select(s).where(s.c.account_id == bindparam("k_account"))


def policy_of(conn: Connection, tenant_id: str) -> DriftPolicy:
    """The tenant's drift policy (DEFAULT_DRIFT_POLICY when none was set)."""
    stored = conn.execute(_POLICY, {"k_tenant": tenant_id}).scalar()
    return cast(DriftPolicy, stored) if stored in DRIFT_POLICIES else DEFAULT_DRIFT_POLICY


def set_policy(conn: Connection, tenant_id: str, policy: DriftPolicy, *, now: dt.datetime) -> None:
    """Set the tenant's drift policy (it applies from its accounts' next sweep)."""
    if policy not in DRIFT_POLICIES:
        raise ValueError(f"unknown drift policy {policy!r}; choose from {', '.join(DRIFT_POLICIES)}")
    values = {"policy": policy, "updated_at": now}
    stmt = upsert_insert(p, conn.dialect.name).values(tenant_id=tenant_id, **values)
    conn.execute(stmt.on_conflict_do_update(index_elements=[p.c.tenant_id], set_=values))


def list_findings(
    conn: Connection, *, tenant_id: str | None, kind: DriftKind | None, after_id: int | None, limit: int
) -> list[Finding]:
    """Findings by id ascending, after ``after_id`` (keyset pages), of one tenant and kind when given."""
    query = select(f).order_by(f.c.id).limit(limit)
    if tenant_id is not None:
        query = query.where(f.c.tenant_id == tenant_id)
    if kind is not None:
        query = query.where(f.c.kind == kind)
    if after_id is not None:
        query = query.where(f.c.id > after_id)
    return [Finding(**row) for row in conn.execute(query).mappings()]


#: The accounts sweeps are owed to: active, of a tenant whose policy is not off (no policy row: the default); over
#: accounts outer-joined with their tenants' policies.
_OWED = and_(a.c.status == "active", func.coalesce(p.c.policy, DEFAULT_DRIFT_POLICY) != "off")
_SWEPT = s.join(a, a.c.id == s.c.account_id).outerjoin(p, p.c.tenant_id == a.c.tenant_id)


def oldest_sweep(conn: Connection) -> dt.datetime | None:
    """When the least recently swept account was last swept (the sweep-age gauge), over the accounts sweeps are owed
    to: one whose tenant turned drift off, or that was disabled, does not age the gauge. None when none was swept."""
    return conn.execute(select(func.min(s.c.swept_at)).select_from(_SWEPT).where(_OWED)).scalar()


def overdue_sweeps(conn: Connection, *, now: dt.datetime, grace: float = DEFAULT_DRIFT_INTERVAL) -> int:
    """How many accounts' sweeps are due for more than ``grace`` seconds (pass CALSYNC_DRIFT_INTERVAL) and not
    claimed by any worker: scheduling has fallen behind (no worker runs maintenance, or it cannot keep up)."""
    late = s.c.next_sweep_at < now - dt.timedelta(seconds=grace)
    return int(conn.execute(select(func.count()).select_from(_SWEPT).where(_OWED, late)).scalar_one())


# --- the scheduler's ---------------------------------------------------------------------------------------------


def claim_due(
    conn: Connection, *, now: dt.datetime, interval: float, providers: Collection[str], limit: int
) -> list[str]:
    """Claim up to ``limit`` accounts whose sweep is due, moving their ``next_sweep_at`` to ``now + interval`` in the
    statement that picks them: a second worker's claim, concurrent or later, skips them. An account owed sweeps
    that has no state yet gets one, due now. Returns the claimed account ids, longest overdue first."""
    if not providers:
        return []
    # The ids of the accounts owed a sweep whose provider reads back.
    owed = (
        select(a.c.id)
        .select_from(a.outerjoin(p, p.c.tenant_id == a.c.tenant_id))
        .where(_OWED, a.c.provider.in_(tuple(providers)))
    )
    fresh = owed.where(~select(s.c.account_id).where(s.c.account_id == a.c.id).exists())
    conn.execute(
        upsert_insert(s, conn.dialect.name)
        .from_select(
            ["account_id", "next_sweep_at", "failures"],
            fresh.add_columns(literal(now, s.c.next_sweep_at.type), literal(0)),
        )
        .on_conflict_do_nothing(index_elements=[s.c.account_id])
    )
    picked = (
        select(s.c.account_id)
        .where(s.c.next_sweep_at <= now, s.c.account_id.in_(owed))
        .order_by(s.c.next_sweep_at)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    claimed = (
        update(s)
        .where(s.c.account_id.in_(picked.scalar_subquery()))
        .values(next_sweep_at=now + dt.timedelta(seconds=interval))
        .returning(s.c.account_id)
    )
    return list(conn.execute(claimed).scalars())


# --- the sweep's -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SweepState:
    """An account's sweep state: the cursor for the next read-back (None: list everything) and failures in a row."""

    account_id: str
    cursor: str | None
    swept_at: dt.datetime | None
    next_sweep_at: dt.datetime
    failures: int


def sweep_state(conn: Connection, account_id: str) -> SweepState | None:
    """The account's sweep state, or None when it was never scheduled."""
    row = conn.execute(_STATE, {"k_account": account_id}).mappings().first()
    return SweepState(**row) if row else None


def record_sweep(conn: Connection, account_id: str, *, cursor: str | None, now: dt.datetime) -> None:
    """A sweep succeeded: the cursor for the next one, when, and no failure in a row. An account without state (a
    sweep enqueued by hand) gets one, next due one interval after the claim that would have made it."""
    conn.execute(
        _sweep_upsert(conn.dialect.name),
        {"account_id": account_id, "next_sweep_at": now, "cursor": cursor, "swept_at": now, "failures": 0},
    )


@functools.cache
def _sweep_upsert(dialect: str) -> Any:
    # record_sweep's statement, its values bound at execution: building it per sweep cost ~0.3 ms of CPU.
    stmt = upsert_insert(s, dialect)
    return stmt.on_conflict_do_update(index_elements=[s.c.account_id],
                                      set_={"cursor": stmt.excluded.cursor, "swept_at": stmt.excluded.swept_at,
                                            "failures": 0})  # fmt: skip


def record_sweep_failure(conn: Connection, account_id: str) -> None:
    """A sweep failed (its read-back raised): one more failure in a row; the cursor stays."""
    conn.execute(update(s).where(s.c.account_id == account_id).values(failures=s.c.failures + 1))


def record_findings(conn: Connection, found: Iterable[Finding]) -> list[Finding]:
    """Insert findings (their ``id`` is ignored) and return them with the ids given."""
    rows = []
    for finding in found:
        values = {k: v for k, v in asdict(finding).items() if k != "id"}
        new_id = conn.execute(insert(f).values(**values).returning(f.c.id)).scalar_one()
        rows.append(Finding(**{**values, "id": int(new_id)}))
    return rows


def mark_verified(
    conn: Connection, verified: Iterable[tuple[TargetKey, DriftKind | None]], *, now: dt.datetime
) -> None:
    """Record, per target, that a sweep compared it now and what it found (None: as calsync wrote it)."""
    params = [{**key_params(key), "v_kind": kind, "v_now": now} for key, kind in verified]
    if params:
        conn.execute(_MARK_VERIFIED, params)


_MARK_VERIFIED = (
    update(t)
    .where(BY_KEY)
    .values(verified_at=bindparam("v_now", type_=t.c.verified_at.type), drift_kind=bindparam("v_kind"))
)


#: Past this many ids, a sweep reads every target of the account rather than an IN list of them.
_LOOKUP_LIMIT = 500
#: Targets joined with their events' latest state (statements are immutable: built once, narrowed per call).
_TARGETS_WITH_EVENTS = select(t, *(c.label(f"ev_{c.name}") for c in ev.c)).join(
    ev, and_(ev.c.tenant_id == t.c.tenant_id, ev.c.id == t.c.event_id)
)


def account_targets(
    conn: Connection, account_id: str, *, event_ids: Collection[str] | None, external_ids: Collection[str] = ()
) -> list[tuple[TargetRow, EventState]]:
    """The account's targets with their events' latest state: every one (``event_ids`` None), or those of
    ``event_ids`` and those known by ``external_ids``."""
    if event_ids is not None and not event_ids and not external_ids:
        return []  # before building the statement: that alone cost ~0.3 ms, an eighth of an unchanged sweep's CPU
    query = _TARGETS_WITH_EVENTS.where(t.c.account_id == account_id)
    if event_ids is not None and len(event_ids) + len(external_ids) <= _LOOKUP_LIMIT:
        query = query.where(t.c.event_id.in_(tuple(event_ids)) | t.c.external_id.in_(tuple(external_ids)))
    pairs = []
    for row in conn.execute(query).mappings():
        target = TargetRow(**{c.name: row[c.name] for c in t.c})
        pairs.append((target, event_from_row({c.name: row[f"ev_{c.name}"] for c in ev.c})))
    return pairs


def reopen_for_repair(
    conn: Connection,
    key: TargetKey,
    *,
    external_id: str,
    version: int,
    kind: DriftKind,
    forget_ref: bool,
    now: dt.datetime,
) -> bool:
    """Put a synced target back to pending so its version is asserted again (enforce), if it is still as the sweep
    compared it (synced at ``version`` with ``external_id``); ``forget_ref`` clears the provider id and etag (the item
    is gone: the repair creates it anew). The kind makes the re-assertion's record count (core/store/targets.py)."""
    values: dict[str, Any] = {"status": "pending", "drift_kind": kind, "verified_at": now, "due_at": now,
                              "wait_reason": None, "updated_at": now}  # fmt: skip
    if forget_ref:
        values.update(external_id=None, external_etag=None)
    compared = (t.c.status == "synced", t.c.synced_version == version, t.c.external_id == external_id)
    return update_target(conn, key, *compared, **values)

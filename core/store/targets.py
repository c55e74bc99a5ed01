"""Repository of ``event_targets``: the sync state of one event in one account.

``wanted_version`` is the event version a target must reach; ``synced_version`` the newest version
the provider is known to show. ``synced_version`` only grows (compare-and-set), so a late,
superseded writer can never move it backwards, and a target stays ``pending`` until the version it
wants has been synced. The one write of a version already synced is a drift repair's (``_REASSERTED``).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from sqlalchemy import ColumnElement, Connection, and_, bindparam, case, func, or_, select, update

from calsync.core.model.calendar import Target
from calsync.core.model.vocabulary import SYNC_STATUSES, SyncStatus, WaitReason, as_wait_reason
from calsync.core.store import events
from calsync.core.store.schema import drift_state, json_ready
from calsync.core.store.schema import event_targets as t

Wanted = Literal["present", "absent"]


class TargetKey(NamedTuple):
    """Primary key of a target."""

    tenant_id: str
    event_id: str
    account_id: str


@dataclass(frozen=True)
class TargetRow:
    """A target as stored."""

    tenant_id: str
    event_id: str
    account_id: str
    wanted: Wanted
    wanted_version: int
    synced_version: int
    external_id: str | None
    external_etag: str | None
    create_attempted: bool  # a create may have been sent (core/store/schema.py)
    status: SyncStatus
    last_error: str | None
    error_class: str | None
    due_at: dt.datetime | None
    updated_at: dt.datetime
    wait_reason: str | None = None  # as stored; read it as ``waiting``
    verified_at: dt.datetime | None = None  # when a drift sweep last compared the provider's item with it
    drift_kind: str | None = None  # what that sweep found (a DriftKind as stored); None: found as written
    job_id: str | None = None  # the target's latest job (None: written by a release before migration 0012)

    @property
    def key(self) -> TargetKey:
        """This target's primary key."""
        return TargetKey(self.tenant_id, self.event_id, self.account_id)

    @property
    def waiting(self) -> WaitReason | None:
        """Why the target waits until ``due_at``: only while it is pending (a sync by the previous release may leave a
        reason behind), an unknown (newer) reason read as ``deferred``."""
        if self.status != "pending" or self.wait_reason is None:
            return None
        return as_wait_reason(self.wait_reason)

    def view(self) -> Target:
        """What an adapter needs to know about the target."""
        return Target(
            event_id=self.event_id,
            account_id=self.account_id,
            tenant_id=self.tenant_id,
            external_id=self.external_id,
            etag=self.external_etag,
            synced_version=self.synced_version,
            # A recorded failure is an earlier attempt too: it covers a create the previous release sent
            # without the marker and failed (its retry middleware recorded the error; migration 0007).
            create_attempted=self.create_attempted or self.error_class is not None,
        )

    def as_json(self) -> dict[str, Any]:
        """JSON-ready form for ``calsync events show``: :data:`_SHOWN`, named as :data:`_SHOWN_AS` says."""
        return json_ready({_SHOWN_AS.get(name, name): getattr(self, name) for name in _SHOWN})


# What ``calsync events show`` shows of a target, in order (the wait reason as read), and the names it gives them.
_SHOWN = ("account_id", "wanted", "status", "wanted_version", "synced_version", "external_id", "external_etag",
          "last_error", "error_class", "waiting", "due_at", "updated_at", "verified_at", "drift_kind")  # fmt: skip
_SHOWN_AS = {"external_etag": "etag", "waiting": "wait_reason"}


# Statements run by every job are built once, with named parameters, rather than per call.
_OF_EVENT = (t.c.tenant_id == bindparam("k_tenant"), t.c.event_id == bindparam("k_event"))
BY_KEY = and_(*_OF_EVENT, t.c.account_id == bindparam("k_account"))
_GET = select(t).where(BY_KEY)
_REACHED = t.c.wanted_version <= bindparam("v_version")
# A drift repair (core/drift/) puts a synced target back to pending at the version it has, with the finding's kind:
# its re-assertion of that version records like a newer one, once (it leaves the target synced).
_REASSERTED = and_(
    t.c.synced_version == bindparam("v_version"),
    t.c.wanted_version <= bindparam("v_version"),
    t.c.status == "pending",
    t.c.drift_kind.is_not(None),
)
_RECORD_SYNCED = (
    update(t)
    .where(BY_KEY, or_(t.c.synced_version < bindparam("v_version"), _REASSERTED))
    .values(
        synced_version=bindparam("v_version"),
        external_id=func.coalesce(bindparam("v_external_id", type_=t.c.external_id.type), t.c.external_id),
        external_etag=bindparam("v_etag", type_=t.c.external_etag.type),
        status=case((_REACHED, bindparam("v_final", type_=t.c.status.type)), else_="pending"),
        last_error=None,
        error_class=None,
        wait_reason=None,
        due_at=case((_REACHED, None), else_=t.c.due_at),
        updated_at=bindparam("v_now", type_=t.c.updated_at.type),
    )
)


def key_params(key: TargetKey) -> dict[str, str]:
    return {"k_tenant": key.tenant_id, "k_event": key.event_id, "k_account": key.account_id}


def get_target(conn: Connection, key: TargetKey) -> TargetRow | None:
    """One target, or None."""
    row = conn.execute(_GET, key_params(key)).mappings().first()
    return TargetRow(**row) if row else None


_LIST = select(t).where(*_OF_EVENT).order_by(t.c.account_id)
# The same, with when each target's account was last swept.
_SHOWN_TARGETS = _LIST.add_columns(drift_state.c.swept_at).outerjoin(
    drift_state, drift_state.c.account_id == t.c.account_id
)


def list_targets(conn: Connection, tenant_id: str, event_id: str) -> list[TargetRow]:
    """Every target of an event, by account id."""
    rows = conn.execute(_LIST, {"k_tenant": tenant_id, "k_event": event_id}).mappings()
    return [TargetRow(**row) for row in rows]


def shown_targets(conn: Connection, tenant_id: str, event_id: str) -> list[TargetRow]:
    """Every target of an event as people are shown it (``calsync events show``, GET /v1/events/{id}): by account id,
    ``verified_at`` as of its account's last sweep (:func:`_as_swept`)."""
    rows = conn.execute(_SHOWN_TARGETS, {"k_tenant": tenant_id, "k_event": event_id}).mappings()
    return [_as_swept(dict(row)) for row in rows]


def _as_swept(values: dict[str, Any]) -> TargetRow:
    # A sweep's read-back lists only what changed since the last one: a synced target written before the sweep began
    # and not mentioned is as the last sweep found it, so it counts as verified when the account was swept. Read
    # here, rather than written to every such row on every sweep (a write per target per interval).
    swept, row = values.pop("swept_at"), TargetRow(**values)
    if swept is None or row.status != "synced" or row.updated_at >= swept:
        return row
    return dataclasses.replace(row, verified_at=max(swept, row.verified_at or swept))


_PLANNED: dict[str, Any] = {
    "wanted": bindparam("v_wanted"),
    "wanted_version": bindparam("v_version"),
    "status": "pending",
    "due_at": bindparam("v_due", type_=t.c.due_at.type),
    "updated_at": bindparam("v_now", type_=t.c.updated_at.type),
    "job_id": bindparam("v_job", type_=t.c.job_id.type),
}
_PLAN = update(t).where(BY_KEY).values(**_PLANNED, wait_reason=None)
_PLAN_NEW = t.insert().values(
    **_PLANNED,
    tenant_id=bindparam("k_tenant"),
    event_id=bindparam("k_event"),
    account_id=bindparam("k_account"),
    synced_version=0,
    create_attempted=False,  # a target that did not exist had no create sent for it
)


def plan_targets(
    conn: Connection,
    planned: Sequence[tuple[TargetKey, Wanted]],
    *,
    version: int,
    due_at: dt.datetime,
    existing: Collection[TargetKey],
    job_ids: Mapping[TargetKey, str] | None = None,
) -> None:
    """Ask for ``version`` of the event to be synced (present) or removed (absent) at each planned target, by the
    job ``job_ids`` names for it: each turns pending. One statement for the ``existing`` rows, one for the new."""
    now = dt.datetime.now(dt.UTC)
    updates: list[dict[str, Any]] = []
    inserts: list[dict[str, Any]] = []
    for key, wanted in planned:
        values = {**key_params(key), "v_wanted": wanted, "v_version": version, "v_due": due_at, "v_now": now,
                  "v_job": (job_ids or {}).get(key)}  # fmt: skip
        (updates if key in existing else inserts).append(values)
    if updates:
        conn.execute(_PLAN, updates)
    if inserts:
        conn.execute(_PLAN_NEW, inserts)


def record_synced(
    conn: Connection,
    key: TargetKey,
    *,
    version: int,
    external_id: str | None,
    etag: str | None,
    final_status: Literal["synced", "deleted"],
) -> bool:
    """Compare-and-set the sync result; False when a newer version was already recorded (the write lost)."""
    params = {
        **key_params(key),
        "v_version": version,
        "v_external_id": external_id,
        "v_etag": etag,
        "v_final": final_status,
        "v_now": dt.datetime.now(dt.UTC),
    }
    return conn.execute(_RECORD_SYNCED, params).rowcount > 0


def mark_create_attempted(conn: Connection, key: TargetKey) -> None:
    """Record, before a create is sent, that one may have been: a retry then looks for what it made."""
    update_target(conn, key, create_attempted=True)


def mark_account_create_attempted(conn: Connection, account_id: str) -> None:
    """Every target of the account may have had a create sent (by the adapter it is moving away from)."""
    conn.execute(update(t).where(t.c.account_id == account_id, t.c.create_attempted.is_(False))
                 .values(create_attempted=True))  # fmt: skip


# The event row locked (PostgreSQL; SQLite writers are serialized anyway), then its targets not yet deleted: two
# last deletions committing side by side cannot both miss each other (the event.cancelled notification).
_LIVE_OF_EVENT = select(func.count()).select_from(t).where(*_OF_EVENT, t.c.status != "deleted")


def all_deleted(conn: Connection, tenant_id: str, event_id: str, *, lock: bool = True) -> bool:
    """Whether every target of the event is deleted at its provider (an event without targets too), this
    transaction's writes included; with ``lock``, the event row locked first (see above)."""
    if lock:
        events.get_event(conn, tenant_id, event_id, lock=True)
    return conn.execute(_LIVE_OF_EVENT, {"k_tenant": tenant_id, "k_event": event_id}).scalar_one() == 0


def update_target(conn: Connection, key: TargetKey, *where: ColumnElement[bool], **values: Any) -> bool:
    """Set ``values`` on the target of ``key`` if it also meets ``where``; whether it did."""
    return conn.execute(update(t).where(BY_KEY, *where).values(**values), key_params(key)).rowcount > 0


def record_retry(
    conn: Connection,
    key: TargetKey,
    *,
    version: int,
    due_at: dt.datetime,
    wait_reason: WaitReason = "retry",
    error_class: str | None = None,
    message: str | None = None,
) -> None:
    """Note why the target waits and until when, and the provider's last error when there is one (a deferral no
    provider call caused keeps the last error it had), unless a newer version already took over."""
    values: dict[str, Any] = {"wait_reason": wait_reason, "due_at": due_at, "updated_at": dt.datetime.now(dt.UTC)}
    if error_class is not None:
        values.update(last_error=message, error_class=error_class)
    update_target(conn, key, t.c.status == "pending", t.c.wanted_version <= version, **values)


def record_failed(conn: Connection, key: TargetKey, *, version: int, error_class: str, message: str) -> None:
    """Mark the target failed (dead-lettered), unless a newer version is already pending for it."""
    update_target(conn, key, t.c.status == "pending", t.c.wanted_version <= version, status="failed",
                  last_error=message, error_class=error_class, due_at=None, wait_reason=None,
                  updated_at=dt.datetime.now(dt.UTC))  # fmt: skip


def reopen(conn: Connection, key: TargetKey, *, due_at: dt.datetime, job_id: str) -> None:
    """Make a failed target pending again, by the job ``job_id`` (DLQ replay); other statuses are left alone."""
    update_target(conn, key, t.c.status == "failed", status="pending", due_at=due_at, wait_reason=None,
            updated_at=dt.datetime.now(dt.UTC), job_id=job_id)  # fmt: skip


def cancel(conn: Connection, key: TargetKey, *, job_id: str, message: str) -> bool:
    """Dead-letter the pending target of the job ``job_id`` as an operator's cancel (its record is the caller's);
    False when the target is no longer pending or a newer job took it over."""
    values = {"status": "failed", "last_error": message, "error_class": "JobCancelled", "due_at": None,
              "wait_reason": None, "updated_at": dt.datetime.now(dt.UTC)}  # fmt: skip
    changed = update(t).where(BY_KEY, t.c.status == "pending", t.c.job_id == job_id).values(**values)
    return bool(conn.execute(changed, key_params(key)).rowcount)


def overdue(conn: Connection, *, before: dt.datetime, limit: int) -> list[TargetRow]:
    """Pending targets whose job should have run before ``before`` (their message may have been lost): those whose
    enqueue failed (no due time) first, then the longest overdue.

    Two queries, each a range of the (status, due_at) index: as one ``due_at IS NULL OR due_at < …`` filter,
    PostgreSQL reads every pending target to find none overdue."""
    pending = select(t).where(t.c.status == "pending")
    unqueued = conn.execute(pending.where(t.c.due_at.is_(None)).limit(limit)).mappings().all()
    late = pending.where(t.c.due_at < before).order_by(t.c.due_at).limit(limit - len(unqueued))
    return [TargetRow(**row) for row in (*unqueued, *conn.execute(late).mappings())]


def mark_unqueued(conn: Connection, key: TargetKey) -> None:
    """A pending target whose enqueue failed: no due time, so the very next reconcile pass re-enqueues it."""
    update_target(conn, key, t.c.status == "pending", due_at=None, wait_reason="not enqueued")


def postpone(conn: Connection, key: TargetKey, *, due_at: dt.datetime, job_id: str) -> None:
    """Move a pending target's due time, now the job of ``job_id`` (after the reconciler re-enqueued it: it waits for
    nothing else now)."""
    update_target(conn, key, t.c.status == "pending", due_at=due_at, wait_reason=None, job_id=job_id)


def count_by_status(conn: Connection, statuses: Collection[str] = SYNC_STATUSES) -> dict[str, int]:
    """How many targets are in each of ``statuses``. ``calsync status`` and the exporter ask for the outstanding
    ones only (pending, failed): a range of the (status, due_at) index however many are synced, where every
    status would read every target (for tests and tools, not for every scrape)."""
    query = select(t.c.status, func.count()).where(t.c.status.in_(tuple(statuses))).group_by(t.c.status)
    return {status: int(count) for status, count in conn.execute(query).all()}


def oldest_pending_due(conn: Connection) -> dt.datetime | None:
    """Due time of the most overdue pending target."""
    return conn.execute(select(func.min(t.c.due_at)).where(t.c.status == "pending")).scalar()

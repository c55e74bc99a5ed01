"""The webhook tables: endpoints, the outbox of notifications, one delivery row per (notification, endpoint).

**Endpoints.** A tenant's receivers. Secrets are encrypted like credentials
(:class:`~core.store.crypto.CredentialCipher`): a JSON object with the ``current`` secret and, during a
rotation, the ``previous`` one, which signs too until ``previous_expires_at``. The breaker's counters
(failed attempts in a row, since when) live on the row; the delivery decides when they disable it.

**The outbox** (``webhook_notifications``), written in the transaction of what it reports. A
notification's id is its stable ``webhook-id``, so recording it twice (a retried sync, a replayed dead
letter) keeps the first row: the insert does nothing on conflict. ``dispatched_at`` is set once its
delivery rows exist; the reconciler dispatches the rows whose enqueue was lost.

**Deliveries.** The row is the intent: it exists before its message is enqueued, and a ``pending`` row
whose ``next_attempt_at`` is long past was lost by the broker (the reconciler enqueues it again).
Attempts are counted here, not in the message, so a redelivered message cannot restart the schedule.
Finished notifications are pruned with their deliveries by the housekeeping pass
(core/store/finished_notifications.py).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy import ColumnElement, Connection, delete, func, insert, literal_column, select, true, tuple_, update

from calsync.core.model.ids import new_id
from calsync.core.model.vocabulary import (
    WEBHOOK_DELIVERY_STATUSES,
    WebhookDeliveryStatus,
    WebhookDisabledBy,
    WebhookEndpointStatus,
    WebhookEventType,
)
from calsync.core.store.crypto import CredentialCipher
from calsync.core.store.database import upsert_insert
from calsync.core.store.schema import webhook_deliveries as d
from calsync.core.store.schema import webhook_endpoints as w
from calsync.core.store.schema import webhook_notifications as n
from calsync.core.webhooks.model import new_secret


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


# --- endpoints ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Endpoint:
    """A stored endpoint without its secrets: the row's columns."""

    id: str
    tenant_id: str
    url: str
    event_types: list[WebhookEventType]
    status: WebhookEndpointStatus
    disabled_by: WebhookDisabledBy | None
    disabled_reason: str | None
    consecutive_failures: int
    failing_since: dt.datetime | None
    previous_expires_at: dt.datetime | None
    created_at: dt.datetime

    def as_json(self) -> dict[str, Any]:
        """JSON-ready form for ``calsync webhooks list`` and ``GET /v1/webhooks`` (never a secret), in their names."""
        doc = {k: v.isoformat() if isinstance(v, dt.datetime) else v for k, v in asdict(self).items()}
        names = {"event_types": "events", "previous_expires_at": "previous_secret_expires_at"}
        return {names.get(k, k): v for k, v in doc.items()}


_ENDPOINT_COLUMNS = tuple(c for c in w.c if c.name not in ("secrets", "updated_at"))


def _endpoint_is(endpoint_id: str, tenant_id: str | None = None) -> ColumnElement[bool]:
    # The endpoint, and only when it is the tenant's (None: the operator's CLI reaches every tenant's).
    found = w.c.id == endpoint_id
    return found if tenant_id is None else found & (w.c.tenant_id == tenant_id)


def _endpoints(conn: Connection, where: ColumnElement[bool]) -> list[Endpoint]:
    query = select(*_ENDPOINT_COLUMNS).where(where).order_by(w.c.created_at, w.c.id)
    return [Endpoint(**row) for row in conn.execute(query).mappings()]


def create_endpoint(
    conn: Connection, cipher: CredentialCipher, *, tenant_id: str, url: str, events: Iterable[WebhookEventType]
) -> tuple[str, Endpoint]:
    """Register an endpoint; returns its signing secret (shown once) and the stored record."""
    secret, now, endpoint_id = new_secret(), _now(), new_id("whe")
    row = {"id": endpoint_id, "tenant_id": tenant_id, "url": url, "event_types": list(events), "status": "enabled"}
    secrets = cipher.encrypt({"current": secret})
    conn.execute(insert(w).values(secrets=secrets, consecutive_failures=0, created_at=now, updated_at=now, **row))
    return secret, _endpoints(conn, w.c.id == endpoint_id)[0]


def get_endpoint(conn: Connection, endpoint_id: str, tenant_id: str | None = None) -> Endpoint | None:
    """One endpoint (of that tenant, when given), or None."""
    found = _endpoints(conn, _endpoint_is(endpoint_id, tenant_id))
    return found[0] if found else None


def list_endpoints(conn: Connection, tenant_id: str | None = None) -> list[Endpoint]:
    """Every endpoint (of one tenant), oldest first."""
    return _endpoints(conn, true() if tenant_id is None else w.c.tenant_id == tenant_id)


def subscribed(conn: Connection, tenant_id: str, event_type: WebhookEventType) -> list[Endpoint]:
    """The enabled endpoints of a tenant that want ``event_type``."""
    found = _endpoints(conn, (w.c.tenant_id == tenant_id) & (w.c.status == "enabled"))
    return [e for e in found if event_type in e.event_types]


def subscriptions(conn: Connection) -> dict[str, frozenset[str]]:
    """Tenant → the event types its enabled endpoints want (the workers' cached directory)."""
    found: dict[str, set[str]] = {}
    for row in conn.execute(select(w.c.tenant_id, w.c.event_types).where(w.c.status == "enabled")):
        found.setdefault(row.tenant_id, set()).update(row.event_types)
    return {tenant: frozenset(types) for tenant, types in found.items()}


def signing_secrets(conn: Connection, cipher: CredentialCipher, endpoint_id: str, now: dt.datetime) -> list[str]:
    """The secrets that sign a request now: the current one, and the previous one during its grace period."""
    row = conn.execute(select(w.c.secrets, w.c.previous_expires_at).where(w.c.id == endpoint_id)).first()
    if row is None:
        return []
    stored = cipher.decrypt(row.secrets)
    keys = [str(stored["current"])]
    if stored.get("previous") and row.previous_expires_at is not None and row.previous_expires_at > now:
        keys.append(str(stored["previous"]))
    return keys


def rotate_secret(
    conn: Connection, cipher: CredentialCipher, endpoint_id: str, tenant_id: str | None, *, grace_seconds: float
) -> str | None:
    """A new current secret; the old one keeps signing for ``grace_seconds``. None when there is no such endpoint."""
    row = conn.execute(select(w.c.secrets).where(_endpoint_is(endpoint_id, tenant_id))).first()
    if row is None:
        return None
    secret, now = new_secret(), _now()
    stored = {"current": secret, "previous": cipher.decrypt(row.secrets)["current"]}
    expires = now + dt.timedelta(seconds=grace_seconds)
    values = {"secrets": cipher.encrypt(stored), "previous_expires_at": expires, "updated_at": now}
    conn.execute(update(w).where(w.c.id == endpoint_id).values(**values))
    return secret


def set_status(
    conn: Connection,
    endpoint_id: str,
    status: WebhookEndpointStatus,
    tenant_id: str | None = None,
    *,
    by: WebhookDisabledBy = "operator",
    reason: str | None = None,
) -> bool:
    """Enable (counters reset) or disable an endpoint; False when there is no such endpoint (of that tenant)."""
    values: dict[str, Any] = {"status": status, "updated_at": _now()}
    if status == "enabled":
        values.update(disabled_by=None, disabled_reason=None, consecutive_failures=0, failing_since=None)
    else:
        values.update(disabled_by=by, disabled_reason=reason)
    return bool(conn.execute(update(w).where(_endpoint_is(endpoint_id, tenant_id)).values(**values)).rowcount)


def record_failure(conn: Connection, endpoint_id: str, now: dt.datetime) -> Endpoint | None:
    """One more failed attempt in a row (the first one starts ``failing_since``); the updated endpoint."""
    streak = {
        "consecutive_failures": w.c.consecutive_failures + 1,
        "failing_since": func.coalesce(w.c.failing_since, now),
    }
    conn.execute(update(w).where(w.c.id == endpoint_id).values(updated_at=now, **streak))
    return get_endpoint(conn, endpoint_id)


def record_success(conn: Connection, endpoint_id: str) -> None:
    """A 2xx answer closes the failure streak."""
    values = {"consecutive_failures": 0, "failing_since": None, "updated_at": _now()}
    conn.execute(update(w).where(w.c.id == endpoint_id, w.c.consecutive_failures > 0).values(**values))


def remove_endpoint(conn: Connection, endpoint_id: str, tenant_id: str | None = None) -> bool:
    """Delete an endpoint (of that tenant) and its deliveries; False when there is no such endpoint."""
    if get_endpoint(conn, endpoint_id, tenant_id) is None:
        return False
    conn.execute(delete(d).where(d.c.endpoint_id == endpoint_id))
    return bool(conn.execute(delete(w).where(w.c.id == endpoint_id)).rowcount)


def count_disabled(conn: Connection) -> dict[str, int]:
    """Disabled endpoints by who disabled them (the ``calsync_webhook_endpoints_disabled`` gauge)."""
    by = func.coalesce(w.c.disabled_by, literal_column("'operator'"))  # one expression for SELECT and GROUP BY
    query = select(by, func.count()).where(w.c.status == "disabled").group_by(by)
    return {"auto": 0, "operator": 0} | {str(who): int(n) for who, n in conn.execute(query)}


# --- the outbox -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Notification:
    """One outbox row."""

    id: str
    tenant_id: str
    event_type: WebhookEventType
    payload: dict[str, Any]
    created_at: dt.datetime
    dispatched_at: dt.datetime | None


_RECORD = {dialect: upsert_insert(n, dialect).on_conflict_do_nothing(index_elements=[n.c.id])
           for dialect in ("sqlite", "postgresql")}  # fmt: skip


def record_notification(
    conn: Connection,
    notification_id: str,
    tenant_id: str,
    event_type: WebhookEventType,
    payload: dict[str, Any],
) -> None:
    """Add a notification in the transaction of what it reports: one statement, nothing if it is recorded already."""
    row: dict[str, Any] = {"id": notification_id, "tenant_id": tenant_id, "event_type": event_type}
    row |= {"payload": payload, "created_at": _now(), "dispatched_at": None}
    conn.execute(_RECORD[conn.dialect.name], row)


def get_notification(conn: Connection, notification_id: str) -> Notification | None:
    """One notification, or None."""
    row = conn.execute(select(n).where(n.c.id == notification_id)).mappings().first()
    return Notification(**row) if row else None


def undispatched(conn: Connection, *, before: dt.datetime, limit: int) -> list[str]:
    """Ids of notifications recorded before ``before`` whose deliveries were never created (lost enqueues)."""
    lost = n.c.dispatched_at.is_(None) & (n.c.created_at < before)
    return list(conn.execute(select(n.c.id).where(lost).order_by(n.c.created_at).limit(limit)).scalars())


def claim_dispatch(conn: Connection, notification_id: str) -> bool:
    """Mark it dispatched (its delivery rows are created in this transaction); False if another dispatch did."""
    claimed = update(n).where(n.c.id == notification_id, n.c.dispatched_at.is_(None))
    return bool(conn.execute(claimed.values(dispatched_at=_now())).rowcount)


# --- deliveries -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Delivery:
    """One (notification, endpoint) delivery."""

    notification_id: str
    endpoint_id: str
    status: WebhookDeliveryStatus
    attempts: int
    last_status_code: int | None
    last_error: str | None
    next_attempt_at: dt.datetime | None
    created_at: dt.datetime
    updated_at: dt.datetime


def _delivery_is(notification_id: str, endpoint_id: str) -> ColumnElement[bool]:
    return (d.c.notification_id == notification_id) & (d.c.endpoint_id == endpoint_id)


def create_deliveries(conn: Connection, notification_id: str, endpoint_ids: Iterable[str]) -> None:
    """One pending row per endpoint, due now; rows that exist already are kept as they are."""
    now = _now()
    new = {"notification_id": notification_id, "status": "pending", "attempts": 0, "next_attempt_at": now}
    rows = [{**new, "endpoint_id": e, "created_at": now, "updated_at": now} for e in endpoint_ids]
    if rows:
        keys = [d.c.notification_id, d.c.endpoint_id]
        conn.execute(upsert_insert(d, conn.dialect.name).on_conflict_do_nothing(index_elements=keys), rows)


def get_delivery(conn: Connection, notification_id: str, endpoint_id: str) -> Delivery | None:
    """One delivery, or None."""
    row = conn.execute(select(d).where(_delivery_is(notification_id, endpoint_id))).mappings().first()
    return Delivery(**row) if row else None


def _update_delivery(conn: Connection, notification_id: str, endpoint_id: str, was: str, **values: Any) -> bool:
    # Only a row still in status ``was``: a delivery another run finished meanwhile is left as it is.
    where = _delivery_is(notification_id, endpoint_id) & (d.c.status == was)
    return bool(conn.execute(update(d).where(where).values(updated_at=_now(), **values)).rowcount)


def record_attempt(
    conn: Connection,
    notification_id: str,
    endpoint_id: str,
    status: WebhookDeliveryStatus,
    status_code: int | None,
    error: str | None,
    next_attempt_at: dt.datetime | None = None,
) -> bool:
    """Count one attempt of a pending delivery and what it gave (the error's first 1000 characters); False when
    it is no longer pending."""
    values = {"status": status, "attempts": d.c.attempts + 1, "last_status_code": status_code}
    error = error[:1000] if error else None
    return _update_delivery(
        conn, notification_id, endpoint_id, "pending", last_error=error, next_attempt_at=next_attempt_at, **values
    )


def reopen_delivery(conn: Connection, notification_id: str, endpoint_id: str) -> bool:
    """Make a failed delivery pending again with a fresh schedule (a DLQ replay); False if it is not failed."""
    values = {"status": "pending", "attempts": 0, "next_attempt_at": _now()}
    return _update_delivery(conn, notification_id, endpoint_id, "failed", **values)


def postpone_delivery(conn: Connection, notification_id: str, endpoint_id: str, *, due_at: dt.datetime) -> None:
    """The reconciler re-enqueued it: not overdue again before ``due_at``."""
    _update_delivery(conn, notification_id, endpoint_id, "pending", next_attempt_at=due_at)


def overdue_deliveries(conn: Connection, *, before: dt.datetime, limit: int) -> list[Delivery]:
    """Pending deliveries whose next attempt was due before ``before``: their message was lost."""
    lost = (d.c.status == "pending") & (d.c.next_attempt_at < before)
    query = select(d).where(lost).order_by(d.c.next_attempt_at).limit(limit)
    return [Delivery(**row) for row in conn.execute(query).mappings()]


DeliveryKey = tuple[dt.datetime, str, str]  # (updated_at, notification_id, endpoint_id) of a page's last delivery


def recent_deliveries(
    conn: Connection,
    *,
    statuses: Iterable[str] = WEBHOOK_DELIVERY_STATUSES,
    endpoint_id: str | None = None,
    before: DeliveryKey | None = None,
    limit: int = 50,
) -> list[Delivery]:
    """Up to ``limit`` deliveries in ``statuses`` (of one endpoint), most recently changed first, after the key
    ``before``: the console's keyset pages. One endpoint's read ``ix_webhook_deliveries_endpoint``, the outstanding
    ones (pending, failed) a range of ``ix_webhook_deliveries_status_next``; both are sorted after the read, the
    delivered ones too, which the webhook retention (CALSYNC_WEBHOOK_RETENTION) bounds."""
    query = select(d).where(d.c.status.in_(tuple(statuses)))
    if endpoint_id is not None:
        query = query.where(d.c.endpoint_id == endpoint_id)
    if before is not None:
        query = query.where(tuple_(d.c.updated_at, d.c.notification_id, d.c.endpoint_id) < tuple_(*before))
    order = (d.c.updated_at.desc(), d.c.notification_id.desc(), d.c.endpoint_id.desc())
    return [Delivery(**row) for row in conn.execute(query.order_by(*order).limit(limit)).mappings()]


def count_deliveries(conn: Connection, statuses: Iterable[str] = WEBHOOK_DELIVERY_STATUSES) -> dict[str, int]:
    """Deliveries per status among ``statuses``. ``calsync status`` and the exporter ask for the outstanding ones
    only: a range of the (status, next_attempt_at) index, where every delivered one would be read."""
    query = select(d.c.status, func.count()).where(d.c.status.in_(tuple(statuses))).group_by(d.c.status)
    return {status: int(count) for status, count in conn.execute(query)}

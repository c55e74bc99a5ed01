"""Repository of ``webhook_endpoints``: a tenant's receivers, their encrypted signing secrets, their breaker.

Secrets are encrypted like credentials (:class:`~core.store.crypto.CredentialCipher`): a JSON object with
the ``current`` secret and, during a rotation, the ``previous`` one, which signs too until
``previous_expires_at``. The breaker's counters (failed attempts in a row, since when) live on the row;
the delivery layer decides when they disable the endpoint.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, delete, insert, select, update

from calsync.core.model.ids import new_id
from calsync.core.model.vocabulary import WebhookDisabledBy, WebhookEndpointStatus, WebhookEventType
from calsync.core.model.webhook_signing import new_secret
from calsync.core.store.crypto import CredentialCipher
from calsync.core.store.schema import webhook_endpoints as w

ENDPOINT_PREFIX = "whe"


@dataclass(frozen=True)
class Endpoint:
    """A stored endpoint without its secrets."""

    id: str
    tenant_id: str
    url: str
    event_types: tuple[WebhookEventType, ...]
    status: WebhookEndpointStatus
    disabled_by: WebhookDisabledBy | None
    disabled_reason: str | None
    consecutive_failures: int
    failing_since: dt.datetime | None
    previous_expires_at: dt.datetime | None
    created_at: dt.datetime

    def as_json(self) -> dict[str, Any]:
        """JSON-ready form for ``calsync webhooks list`` and ``GET /v1/webhooks`` (never a secret)."""

        def iso(value: dt.datetime | None) -> str | None:
            return value.isoformat() if value else None

        return {
            "id": self.id,
            "tenant_id": self.tenant_id,
            "url": self.url,
            "events": list(self.event_types),
            "status": self.status,
            "disabled_by": self.disabled_by,
            "disabled_reason": self.disabled_reason,
            "consecutive_failures": self.consecutive_failures,
            "failing_since": iso(self.failing_since),
            "previous_secret_expires_at": iso(self.previous_expires_at),
            "created_at": self.created_at.isoformat(),
        }


_COLUMNS = tuple(c for c in w.c if c.name not in ("secrets", "updated_at"))


def _endpoint(row: Any) -> Endpoint:
    return Endpoint(
        row.id, row.tenant_id, row.url, tuple(row.event_types), row.status, row.disabled_by, row.disabled_reason,
        row.consecutive_failures, row.failing_since, row.previous_expires_at, row.created_at,
    )  # fmt: skip


def create(
    conn: Connection, cipher: CredentialCipher, *, tenant_id: str, url: str, event_types: Collection[WebhookEventType]
) -> tuple[str, Endpoint]:
    """Register an endpoint; returns its signing secret (shown once) and the stored record."""
    secret = new_secret()
    now = dt.datetime.now(dt.UTC)
    endpoint_id = new_id(ENDPOINT_PREFIX)
    conn.execute(
        insert(w).values(
            id=endpoint_id, tenant_id=tenant_id, url=url, event_types=list(event_types),
            secrets=cipher.encrypt({"current": secret}), status="enabled", consecutive_failures=0,
            created_at=now, updated_at=now,
        )
    )  # fmt: skip
    found = get(conn, endpoint_id)
    assert found is not None
    return secret, found


def get(conn: Connection, endpoint_id: str, *, tenant_id: str | None = None) -> Endpoint | None:
    """One endpoint (of that tenant, when given), or None."""
    query = select(*_COLUMNS).where(w.c.id == endpoint_id)
    if tenant_id is not None:
        query = query.where(w.c.tenant_id == tenant_id)
    row = conn.execute(query).first()
    return _endpoint(row) if row else None


def list_endpoints(conn: Connection, tenant_id: str | None = None) -> list[Endpoint]:
    """Every endpoint (of one tenant), oldest first."""
    query = select(*_COLUMNS).order_by(w.c.created_at, w.c.id)
    if tenant_id is not None:
        query = query.where(w.c.tenant_id == tenant_id)
    return [_endpoint(row) for row in conn.execute(query)]


def subscribed(conn: Connection, tenant_id: str, event_type: WebhookEventType) -> list[Endpoint]:
    """The enabled endpoints of a tenant that want ``event_type``."""
    query = select(*_COLUMNS).where(w.c.tenant_id == tenant_id, w.c.status == "enabled").order_by(w.c.id)
    return [e for e in map(_endpoint, conn.execute(query)) if event_type in e.event_types]


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


def rotate(conn: Connection, cipher: CredentialCipher, endpoint_id: str, *, grace_seconds: float) -> str | None:
    """A new current secret; the old one keeps signing for ``grace_seconds``. None when there is no such endpoint."""
    row = conn.execute(select(w.c.secrets).where(w.c.id == endpoint_id)).first()
    if row is None:
        return None
    secret = new_secret()
    now = dt.datetime.now(dt.UTC)
    previous = cipher.decrypt(row.secrets)["current"]
    conn.execute(
        update(w)
        .where(w.c.id == endpoint_id)
        .values(
            secrets=cipher.encrypt({"current": secret, "previous": previous}),
            previous_expires_at=now + dt.timedelta(seconds=grace_seconds),
            updated_at=now,
        )
    )
    return secret


def set_status(
    conn: Connection,
    endpoint_id: str,
    status: WebhookEndpointStatus,
    *,
    by: WebhookDisabledBy | None = None,
    reason: str | None = None,
) -> bool:
    """Enable (counters reset) or disable an endpoint; False when there is no such endpoint."""
    values: dict[str, Any] = {"status": status, "updated_at": dt.datetime.now(dt.UTC)}
    if status == "enabled":
        values.update(disabled_by=None, disabled_reason=None, consecutive_failures=0, failing_since=None)
    else:
        values.update(disabled_by=by or "operator", disabled_reason=reason)
    return bool(conn.execute(update(w).where(w.c.id == endpoint_id).values(**values)).rowcount)


def record_failure(conn: Connection, endpoint_id: str, now: dt.datetime) -> Endpoint | None:
    """One more failed attempt in a row (the first one starts ``failing_since``); the updated endpoint."""
    conn.execute(
        update(w).where(w.c.id == endpoint_id).values(consecutive_failures=w.c.consecutive_failures + 1, updated_at=now)
    )
    conn.execute(update(w).where(w.c.id == endpoint_id, w.c.failing_since.is_(None)).values(failing_since=now))
    return get(conn, endpoint_id)


def record_success(conn: Connection, endpoint_id: str) -> None:
    """A 2xx answer closes the failure streak."""
    conn.execute(
        update(w)
        .where(w.c.id == endpoint_id, w.c.consecutive_failures > 0)
        .values(consecutive_failures=0, failing_since=None, updated_at=dt.datetime.now(dt.UTC))
    )


def remove(conn: Connection, endpoint_id: str) -> bool:
    """Delete an endpoint (its deliveries are deleted by the caller, in the same transaction)."""
    return bool(conn.execute(delete(w).where(w.c.id == endpoint_id)).rowcount)


def count_disabled(conn: Connection) -> dict[str, int]:
    """Disabled endpoints by who disabled them (the ``calsync_webhook_endpoints_disabled`` gauge)."""
    counts = {"auto": 0, "operator": 0}
    for row in conn.execute(select(w.c.disabled_by).where(w.c.status == "disabled")):
        counts[row.disabled_by or "operator"] += 1
    return counts

"""Registering and operating webhook endpoints: what ``calsync webhooks`` and ``/v1/webhooks`` call.

A URL is checked at registration like at every delivery (https unless ``WEBHOOK_ALLOW_HTTP``; no address
in a refused range unless allow-listed). The signing secret is returned once, by :meth:`Registry.add`
and :meth:`Registry.rotate_secret`, and stored encrypted only.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import cast

from calsync.core.model.errors import InvalidWebhookEndpoint, WebhookEndpointNotFound
from calsync.core.model.vocabulary import WEBHOOK_EVENT_TYPES, WebhookEventType
from calsync.core.store import webhook_deliveries, webhook_endpoints
from calsync.core.store.crypto import CredentialCipher
from calsync.core.store.database import Database
from calsync.core.store.webhook_endpoints import Endpoint
from calsync.core.webhooks.transport import Transport


def event_types(values: Iterable[str]) -> tuple[WebhookEventType, ...]:
    """The event types asked for, checked against the vocabulary (at least one)."""
    wanted = tuple(dict.fromkeys(v.strip() for v in values if v.strip()))
    unknown = [v for v in wanted if v not in WEBHOOK_EVENT_TYPES]
    if unknown:
        raise InvalidWebhookEndpoint(f"unknown event types {unknown}; known: {', '.join(WEBHOOK_EVENT_TYPES)}")
    if not wanted:
        raise InvalidWebhookEndpoint(f"name at least one event type of: {', '.join(WEBHOOK_EVENT_TYPES)}")
    return cast(tuple[WebhookEventType, ...], wanted)


class Registry:
    """A tenant's endpoints; ``tenant_id`` None (the operator's CLI) reaches every tenant's."""

    def __init__(self, db: Database, cipher: CredentialCipher, transport: Transport, *, grace_seconds: float) -> None:
        self.db, self.cipher, self.transport, self.grace = db, cipher, transport, grace_seconds

    def add(self, tenant_id: str, url: str, events: Iterable[str]) -> tuple[str, Endpoint]:
        """Register an endpoint after checking its URL; returns its secret (shown once) and the record."""
        types = event_types(events)
        self.transport.check(url)
        with self.db.write() as conn:
            return webhook_endpoints.create(conn, self.cipher, tenant_id=tenant_id, url=url, event_types=types)

    def list(self, tenant_id: str | None = None) -> list[Endpoint]:
        """Endpoints, oldest first."""
        with self.db.read() as conn:
            return webhook_endpoints.list_endpoints(conn, tenant_id)

    def get(self, endpoint_id: str, tenant_id: str | None = None) -> Endpoint:
        """One endpoint; WebhookEndpointNotFound when it is not there (or not the tenant's)."""
        with self.db.read() as conn:
            found = webhook_endpoints.get(conn, endpoint_id, tenant_id=tenant_id)
        if found is None:
            raise WebhookEndpointNotFound(f"no webhook endpoint {endpoint_id}")
        return found

    def disable(self, endpoint_id: str, tenant_id: str | None = None, *, reason: str | None = None) -> Endpoint:
        """Stop delivering to an endpoint (its pending deliveries go to the DLQ, for a replay after enabling)."""
        self.get(endpoint_id, tenant_id)
        with self.db.write() as conn:
            webhook_endpoints.set_status(conn, endpoint_id, "disabled", by="operator", reason=reason)
        return self.get(endpoint_id, tenant_id)

    def enable(self, endpoint_id: str, tenant_id: str | None = None) -> Endpoint:
        """Deliver again (also after the breaker disabled it); the failure streak starts from zero."""
        self.get(endpoint_id, tenant_id)
        with self.db.write() as conn:
            webhook_endpoints.set_status(conn, endpoint_id, "enabled")
        return self.get(endpoint_id, tenant_id)

    def remove(self, endpoint_id: str, tenant_id: str | None = None) -> None:
        """Delete an endpoint and its deliveries."""
        self.get(endpoint_id, tenant_id)
        with self.db.write() as conn:
            webhook_deliveries.remove_endpoint(conn, endpoint_id)
            webhook_endpoints.remove(conn, endpoint_id)

    def rotate_secret(self, endpoint_id: str, tenant_id: str | None = None) -> tuple[str, Endpoint]:
        """A new secret (shown once); the previous one keeps signing for the grace period."""
        self.get(endpoint_id, tenant_id)
        with self.db.write() as conn:
            secret = webhook_endpoints.rotate(conn, self.cipher, endpoint_id, grace_seconds=self.grace)
        if secret is None:
            raise WebhookEndpointNotFound(f"no webhook endpoint {endpoint_id}")
        return secret, self.get(endpoint_id, tenant_id)

"""Registering and operating webhook endpoints: what ``calsync webhooks`` and ``/v1/webhooks`` call.

A URL is checked at registration like at every delivery (https unless ``WEBHOOK_ALLOW_HTTP``; no address
in a refused range unless allow-listed). The signing secret is returned once, by :meth:`Endpoints.add`
and :meth:`Endpoints.rotate_secret`, and stored encrypted only.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NoReturn, cast

from calsync.core.model.errors import InvalidWebhookEndpoint, WebhookEndpointNotFound
from calsync.core.model.vocabulary import WEBHOOK_EVENT_TYPES, WebhookEventType
from calsync.core.store.crypto import CredentialCipher
from calsync.core.store.database import Database
from calsync.core.webhooks import store
from calsync.core.webhooks.settings import WebhookSettings
from calsync.core.webhooks.store import Endpoint
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


class Endpoints:
    """A tenant's endpoints; ``tenant_id`` None (the operator's CLI) reaches every tenant's.

    Another tenant's endpoint is not found, as one that does not exist (WebhookEndpointNotFound).
    """

    def __init__(self, db: Database, cipher: CredentialCipher, transport: Transport, *, grace_seconds: float) -> None:
        self.db, self.cipher, self.transport, self.grace = db, cipher, transport, grace_seconds

    @classmethod
    def from_settings(cls, db: Database, cipher: CredentialCipher, settings: WebhookSettings) -> Endpoints:
        """The endpoints, with the URL rules the settings give (the same as at delivery)."""
        return cls(db, cipher, Transport.from_settings(settings), grace_seconds=settings.webhook_secret_grace)

    def add(self, tenant_id: str, url: str, events: Iterable[str]) -> tuple[str, Endpoint]:
        """Register an endpoint after checking its URL; returns its secret (shown once) and the record."""
        types = event_types(events)
        self.transport.check(url)
        with self.db.write() as conn:
            return store.create_endpoint(conn, self.cipher, tenant_id=tenant_id, url=url, events=types)

    def list(self, tenant_id: str | None = None) -> list[Endpoint]:
        """Endpoints, oldest first."""
        with self.db.read() as conn:
            return store.list_endpoints(conn, tenant_id)

    def get(self, endpoint_id: str, tenant_id: str | None = None) -> Endpoint:
        """One endpoint."""
        with self.db.read() as conn:
            found = store.get_endpoint(conn, endpoint_id, tenant_id)
        return found if found is not None else _missing(endpoint_id)

    def disable(self, endpoint_id: str, tenant_id: str | None = None, *, reason: str | None = None) -> Endpoint:
        """Stop delivering to an endpoint (its pending deliveries go to the DLQ, for a replay after enabling)."""
        with self.db.write() as conn:
            done = store.set_status(conn, endpoint_id, "disabled", tenant_id, reason=reason)
        return self.get(endpoint_id) if done else _missing(endpoint_id)

    def enable(self, endpoint_id: str, tenant_id: str | None = None) -> Endpoint:
        """Deliver again (also after the breaker disabled it); the failure streak starts from zero."""
        with self.db.write() as conn:
            done = store.set_status(conn, endpoint_id, "enabled", tenant_id)
        return self.get(endpoint_id) if done else _missing(endpoint_id)

    def remove(self, endpoint_id: str, tenant_id: str | None = None) -> None:
        """Delete an endpoint and its deliveries."""
        with self.db.write() as conn:
            if not store.remove_endpoint(conn, endpoint_id, tenant_id):
                _missing(endpoint_id)

    def rotate_secret(self, endpoint_id: str, tenant_id: str | None = None) -> tuple[str, Endpoint]:
        """A new secret (shown once); the previous one keeps signing for the grace period."""
        with self.db.write() as conn:
            secret = store.rotate_secret(conn, self.cipher, endpoint_id, tenant_id, grace_seconds=self.grace)
        return (secret, self.get(endpoint_id)) if secret is not None else _missing(endpoint_id)


def _missing(endpoint_id: str) -> NoReturn:
    raise WebhookEndpointNotFound(f"no webhook endpoint {endpoint_id}")

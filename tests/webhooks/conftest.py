"""Fixtures of the webhook tests: a pipeline whose webhooks may reach 127.0.0.1 over http, and receivers."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from sqlalchemy import Row, select

from calsync.core.store.schema import webhook_notifications
from calsync.core.webhooks import store
from calsync.core.webhooks.deliverer import Deliverer, DeliveryPolicy
from calsync.core.webhooks.endpoints import Endpoints
from calsync.core.webhooks.store import Delivery
from calsync.core.webhooks.transport import Transport
from tests.support import Pipeline
from tests.webhooks.receiver import Receiver, serve

# The receivers listen on loopback over http: both need the development settings (the tests' allow-list).
WEBHOOK_TEST_SETTINGS: dict[str, Any] = {
    "webhook_allow_http": True,
    "webhook_allowed_networks": "127.0.0.0/8",
    "webhook_retry_schedule": (0.05, 0.05, 0.05),
    "webhook_timeout": 2,
    "secret_key": "XeyDGhcPmgrFLQFm6f7d4EVI97A3kAWsW6EkRlbw9ys=",
}


# A policy for the tests that only dispatch, or deliver once.
NO_RETRY = DeliveryPolicy(schedule=(1,), jitter=0, max_retry_after=1, disable_after=3600, disable_min_failures=10)


class Hooks:
    """A pipeline with webhooks, plus shortcuts to register endpoints and read deliveries."""

    def __init__(self, pipeline: Pipeline) -> None:
        self.pipeline = pipeline
        self.endpoints = Endpoints.from_settings(pipeline.clients.db, pipeline.clients.cipher, pipeline.settings)

    def endpoint(self, receiver: Receiver, events: str = "sync.succeeded", tenant: str = "tenant-1") -> str:
        """Register ``receiver`` and give it the secret."""
        secret, endpoint = self.endpoints.add(tenant, receiver.url, events.split(","))
        receiver.secrets.append(secret)
        return endpoint.id

    def notifications(self, event_type: str | None = None) -> list[Row[Any]]:
        """Outbox rows (of a type), oldest first."""
        query = select(webhook_notifications).order_by(webhook_notifications.c.created_at, webhook_notifications.c.id)
        if event_type is not None:
            query = query.where(webhook_notifications.c.event_type == event_type)
        with self.pipeline.clients.db.read() as conn:
            return list(conn.execute(query))

    def deliverer(self, policy: DeliveryPolicy = NO_RETRY, transport: Transport | None = None) -> Deliverer:
        """A deliverer of this pipeline (the settings' transport unless given)."""
        pipeline, settings = self.pipeline, self.pipeline.settings
        transport = transport or Transport.from_settings(settings)
        runtime = pipeline.clients
        return Deliverer(runtime.db, runtime.cipher, transport, pipeline.broker, settings.webhook_queue, policy)

    def status(self, notification_id: str, endpoint_id: str) -> str | None:
        """A delivery's status, None before the dispatch created it."""
        with self.pipeline.clients.db.read() as conn:
            found = store.get_delivery(conn, notification_id, endpoint_id)
        return found.status if found else None

    def delivery(self, notification_id: str, endpoint_id: str) -> Delivery:
        """One delivery row."""
        with self.pipeline.clients.db.read() as conn:
            found = store.get_delivery(conn, notification_id, endpoint_id)
        assert found is not None
        return found


@pytest.fixture
def hooks_factory(settings_factory: Any) -> Iterator[Callable[..., Hooks]]:
    """Builds a webhook pipeline (setting overrides as keyword arguments)."""
    built: list[Pipeline] = []

    def build(**overrides: Any) -> Hooks:
        pipeline = Pipeline(settings_factory(**{**WEBHOOK_TEST_SETTINGS, **overrides}))
        built.append(pipeline)
        return Hooks(pipeline)

    yield build
    for pipeline in built:
        pipeline.close()


@pytest.fixture
def hooks(hooks_factory: Callable[..., Hooks]) -> Hooks:
    """A webhook pipeline with the test settings."""
    return hooks_factory()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """A receiver answering 200."""
    yield from serve(Receiver())


@pytest.fixture
def second_receiver() -> Iterator[Receiver]:
    """Another receiver answering 200."""
    yield from serve(Receiver())


@pytest.fixture
def third_receiver() -> Iterator[Receiver]:
    """A third receiver answering 200."""
    yield from serve(Receiver())

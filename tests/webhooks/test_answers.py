"""How each answer of a receiver is taken, one attempt at a time (no worker: the Deliverer is called directly)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import pytest

from calsync.core.model.vocabulary import WebhookOutcome
from calsync.core.store.schema import webhook_endpoints
from calsync.core.webhooks import store
from calsync.core.webhooks.deliverer import Deliverer, DeliveryPolicy
from calsync.core.webhooks.model import notification
from tests.webhooks.conftest import Hooks
from tests.webhooks.receiver import Receiver, serve

SCRIPT: dict[str, tuple[int, dict[str, str], bytes]] = {}


@pytest.fixture
def scripted() -> Iterator[Receiver]:
    """Answers what ``SCRIPT['next']`` says."""
    yield from serve(Receiver(answer=lambda n: SCRIPT["next"]))


def _one(hooks: Hooks, receiver: Receiver, *, max_retry_after: float = 50) -> tuple[Deliverer, str, str]:
    pipeline = hooks.pipeline
    db = pipeline.clients.db
    endpoint_id = hooks.endpoint(receiver)
    notification_id, doc = notification("sync.succeeded", {"tenant_id": "tenant-1", "status": "synced"},
                                        key=[receiver.url])  # fmt: skip
    with db.write() as conn:
        store.record_notification(conn, notification_id, "tenant-1", "sync.succeeded", doc)
    policy = DeliveryPolicy(schedule=(1, 2), jitter=0, max_retry_after=max_retry_after, disable_after=3600,
                            disable_min_failures=10)  # fmt: skip
    deliverer = hooks.deliverer(policy)
    deliverer.dispatch(notification_id)
    return deliverer, notification_id, endpoint_id


@pytest.mark.parametrize(
    ("status", "headers", "outcome"),
    [
        (200, {}, WebhookOutcome.DELIVERED),
        (204, {}, WebhookOutcome.DELIVERED),
        (500, {}, WebhookOutcome.RETRY_SCHEDULED),
        (502, {}, WebhookOutcome.RETRY_SCHEDULED),
        (408, {}, WebhookOutcome.RETRY_SCHEDULED),
        (429, {"retry-after": "5"}, WebhookOutcome.RETRY_SCHEDULED),
        (400, {}, WebhookOutcome.PERMANENT),
        (404, {}, WebhookOutcome.PERMANENT),
        (410, {}, WebhookOutcome.PERMANENT),
        (301, {"location": "http://169.254.169.254/"}, WebhookOutcome.PERMANENT),  # redirects are not followed
    ],
)
def test_each_answer(hooks: Hooks, scripted: Receiver, status: int, headers: dict[str, str], outcome: object) -> None:
    SCRIPT["next"] = (status, headers, b"")
    deliverer, notification_id, endpoint_id = _one(hooks, scripted)
    assert deliverer.deliver(notification_id, endpoint_id).outcome is outcome
    delivery = hooks.delivery(notification_id, endpoint_id)
    assert delivery.attempts == 1 and delivery.last_status_code == status
    expected = {WebhookOutcome.DELIVERED: "delivered", WebhookOutcome.RETRY_SCHEDULED: "pending"}.get(outcome, "failed")
    assert delivery.status == expected
    assert len(scripted.received) == 1 and scripted.received[0].verified_by


def test_retry_after_is_a_floor_and_is_capped(hooks: Hooks, scripted: Receiver) -> None:
    SCRIPT["next"] = (503, {"retry-after": "7200"}, b"")
    deliverer, notification_id, endpoint_id = _one(hooks, scripted, max_retry_after=40)
    before = dt.datetime.now(dt.UTC)
    assert deliverer.deliver(notification_id, endpoint_id).outcome is WebhookOutcome.RETRY_SCHEDULED
    due = hooks.delivery(notification_id, endpoint_id).next_attempt_at
    assert due is not None and 39 <= (due - before).total_seconds() <= 41  # the cap, above the schedule's 1 s


def test_a_connection_error_is_retried_then_exhausted(hooks: Hooks, scripted: Receiver) -> None:
    SCRIPT["next"] = (200, {}, b"")
    deliverer, notification_id, endpoint_id = _one(hooks, scripted)
    with hooks.pipeline.clients.db.write() as conn:  # nothing listens on port 1
        conn.execute(webhook_endpoints.update().values(url="http://127.0.0.1:1/closed"))
    outcomes = [deliverer.deliver(notification_id, endpoint_id).outcome for _ in range(3)]
    assert outcomes == [WebhookOutcome.RETRY_SCHEDULED] * 2 + [WebhookOutcome.EXHAUSTED]
    (record,) = hooks.pipeline.dead_letters(kind="webhook")
    assert record.error_class == "ConnectError" and record.attempts == 3
    assert deliverer.deliver(notification_id, endpoint_id).outcome is WebhookOutcome.SKIPPED  # failed for good

"""The outbox: one notification per logical effect, in the transaction of what it reports; nothing lost."""

from __future__ import annotations

from typing import Any

import pytest

from calsync.core.producer.dead_letters import replay
from calsync.core.producer.reconcile import reconcile
from calsync.core.webhooks import deliverer, outbox, store
from tests.support import wait_until
from tests.webhooks.conftest import Hooks
from tests.webhooks.receiver import Receiver

pytestmark = [pytest.mark.integration, pytest.mark.both_databases]


def test_a_crash_before_the_commit_sends_exactly_one_notification(
    hooks: Hooks, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    pipeline = hooks.pipeline
    hooks.endpoint(receiver)
    real = store.record_notification
    crashes: list[str] = []

    def crash_once(tx: Any, notification_id: str, *args: Any) -> None:
        real(tx, notification_id, *args)  # recorded in the transaction, then the commit never happens
        if not crashes:
            crashes.append(notification_id)
            raise ConnectionError("the database went away before the commit")

    monkeypatch.setattr(store, "record_notification", crash_once)
    account = pipeline.account()
    with pipeline.worker():
        receipt = pipeline.submit([account])
        pipeline.wait_target(receipt.entity_id, account, "synced")
        wait_until(lambda: receiver.received, what="the delivery")
    (notification,) = hooks.notifications()
    assert crashes == [notification.id]  # the retry recorded the same webhook-id
    assert receiver.ids() == [notification.id]
    assert len(pipeline.provider.calls()) >= 2  # the provider was called again by the retry


def test_no_endpoint_no_notification(hooks: Hooks, receiver: Receiver) -> None:
    pipeline = hooks.pipeline
    hooks.endpoint(receiver, tenant="another-tenant")
    account = pipeline.account()
    with pipeline.worker():
        receipt = pipeline.submit([account])
        pipeline.wait_target(receipt.entity_id, account, "synced")
    assert hooks.notifications() == []


def test_a_cancelled_event_notifies_once_every_target_is_deleted(hooks: Hooks, receiver: Receiver) -> None:
    pipeline = hooks.pipeline
    hooks.endpoint(receiver, events="event.cancelled")
    first, second = pipeline.account(account_id="acc-1"), pipeline.account(account_id="acc-2")
    with pipeline.worker():
        receipt = pipeline.submit([first, second])
        pipeline.wait_idle()
        assert hooks.notifications() == []
        pipeline.provider.add_fault(error="invalid", op="delete", account_id=second)
        pipeline.submit(None, operation="delete", entity_id=receipt.entity_id)
        pipeline.wait_target(receipt.entity_id, first, "deleted")
        pipeline.wait_target(receipt.entity_id, second, "failed")
        assert hooks.notifications() == []  # one target is still there
        pipeline.provider.clear_faults()
        assert replay(pipeline.clients, pipeline.dead_letters()).replayed
        pipeline.wait_target(receipt.entity_id, second, "deleted")
        wait_until(lambda: receiver.received, what="the event.cancelled delivery")
    (notification,) = hooks.notifications()
    assert notification.event_type == "event.cancelled"
    (request,) = receiver.received
    assert request.payload["data"] == {**request.payload["data"], "entity_id": receipt.entity_id, "version": 2,
                                       "status": "cancelled", "account_id": None}  # fmt: skip


def test_dead_letters_and_revoked_accounts_are_notified(hooks: Hooks, receiver: Receiver) -> None:
    pipeline = hooks.pipeline
    hooks.endpoint(receiver, events="sync.dead_lettered,account.needs_reauth")
    pipeline.provider.add_fault(error="auth", message="token refresh_token=abc123secret was revoked")
    account = pipeline.account()
    with pipeline.worker():
        pipeline.submit([account])
        wait_until(lambda: len(receiver.received) == 2, what="both notifications")
    by_type = {r.payload["type"]: r.payload["data"] for r in receiver.received}
    assert set(by_type) == {"sync.dead_lettered", "account.needs_reauth"}
    dead = by_type["sync.dead_lettered"]
    assert dead["reason"] == "needs re-authorization" and dead["error_class"] == "AuthRevoked"
    assert dead["account_id"] == account and dead["status"] == "failed"
    assert by_type["account.needs_reauth"]["status"] == "needs_reauth"
    assert all(b"abc123secret" not in r.body for r in receiver.received)  # never the error text


def test_a_lost_dispatch_is_enqueued_by_the_reconciler(
    hooks: Hooks, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    pipeline = hooks.pipeline
    hooks.endpoint(receiver)

    def broker_down(*args: Any) -> Any:
        raise ConnectionError("the broker is unreachable")

    account = pipeline.account()
    with pipeline.worker():
        monkeypatch.setattr(outbox, "webhook_dispatch_message", broker_down)
        receipt = pipeline.submit([account])
        pipeline.wait_target(receipt.entity_id, account, "synced")
        (notification,) = hooks.notifications()
        assert notification.dispatched_at is None and receiver.received == []
        monkeypatch.undo()
        assert reconcile(pipeline.clients, older_than=0).webhooks_requeued == 1
        wait_until(lambda: receiver.received, what="the reconciled delivery")
    assert receiver.ids() == [notification.id]


def test_a_lost_delivery_message_is_enqueued_by_the_reconciler(
    hooks: Hooks, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    pipeline = hooks.pipeline
    endpoint_id = hooks.endpoint(receiver)

    def broker_down(*args: Any) -> Any:
        raise ConnectionError("the broker is unreachable")

    account = pipeline.account()
    with pipeline.worker():
        monkeypatch.setattr(deliverer, "webhook_delivery_message", broker_down)
        pipeline.submit([account])
        (notification,) = wait_until(lambda: hooks.notifications(), what="the notification")
        wait_until(lambda: hooks.status(notification.id, endpoint_id) == "pending", what="the delivery row")
        monkeypatch.undo()
        assert receiver.received == []
        assert reconcile(pipeline.clients, older_than=0).webhooks_requeued == 1
        wait_until(lambda: hooks.status(notification.id, endpoint_id) == "delivered", what="the reconciled delivery")
    assert receiver.ids() == [notification.id]

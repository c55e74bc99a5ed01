"""Webhook deliveries end to end: real worker threads, a real receiver verifying with ``standardwebhooks``."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from calsync.core.model.schemas import published
from calsync.core.model.webhooks import WebhookNotification
from calsync.core.producer.dead_letters import replay
from calsync.core.store import unreadable_secrets
from calsync.core.store.crypto import CredentialCipher, generate_key
from calsync.core.webhooks import store
from calsync.core.webhooks.endpoints import Endpoints
from tests.support import wait_until
from tests.webhooks.conftest import WEBHOOK_TEST_SETTINGS, Hooks
from tests.webhooks.receiver import Receiver, serve

pytestmark = pytest.mark.integration


def test_every_delivery_verifies_across_a_secret_rotation(hooks: Hooks, receiver: Receiver) -> None:
    pipeline = hooks.pipeline
    endpoint_id = hooks.endpoint(receiver)
    account = pipeline.account()
    with pipeline.worker():
        first = pipeline.submit([account], title="before")
        wait_until(lambda: len(receiver.received) == 1, what="the first delivery")
        old_secret = receiver.secrets[0]
        new_secret, _ = hooks.endpoints.rotate_secret(endpoint_id)
        receiver.secrets.append(new_secret)
        pipeline.submit([account], entity_id=first.entity_id, title="after")
        wait_until(lambda: len(receiver.received) == 2, what="the delivery after the rotation")
    before, after = receiver.received
    assert before.verified_by == [old_secret]
    assert after.verified_by == [old_secret, new_secret]  # both signatures during the grace period
    assert len(after.headers["webhook-signature"].split(" ")) == 2
    assert [r.payload["data"]["version"] for r in receiver.received] == [1, 2]
    assert after.payload["type"] == "sync.succeeded" and after.payload["data"]["status"] == "synced"
    assert after.payload["data"]["external_id"] == pipeline.target(first.entity_id, account).external_id
    schema = jsonschema.Draft202012Validator(published()["webhook-notification.schema.json"])
    for request in receiver.received:
        schema.validate(request.payload)


def test_the_documented_body_is_what_the_schema_and_the_model_accept() -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "PROTOCOL.md").read_text()
    found = re.search(r"<!-- webhook example[^>]*-->\n```json\n(.*?)\n```", text, re.DOTALL)
    assert found is not None
    documented = json.loads(found.group(1))
    jsonschema.Draft202012Validator(published()["webhook-notification.schema.json"]).validate(documented)
    assert WebhookNotification.model_validate(documented).data.version == 3


def test_after_the_grace_period_only_the_new_secret_signs(hooks_factory: object, receiver: Receiver) -> None:
    hooks = hooks_factory(webhook_secret_grace=0)  # type: ignore[operator]
    pipeline = hooks.pipeline
    endpoint_id = hooks.endpoint(receiver)
    new_secret, _ = hooks.endpoints.rotate_secret(endpoint_id)
    receiver.secrets.append(new_secret)
    with pipeline.worker():
        pipeline.submit([pipeline.account()])
        wait_until(lambda: receiver.received, what="a delivery")
    assert receiver.received[0].verified_by == [new_secret]


@pytest.fixture
def flaky() -> Iterator[Receiver]:
    """Answers 500 three times, then 200."""
    yield from serve(Receiver(answer=lambda n: 500 if n <= 3 else 200))


def test_server_errors_are_retried_until_the_receiver_accepts(hooks: Hooks, flaky: Receiver) -> None:
    pipeline = hooks.pipeline
    endpoint_id = hooks.endpoint(flaky)
    with pipeline.worker():
        pipeline.submit([pipeline.account()])
        (notification,) = wait_until(lambda: hooks.notifications(), what="the notification")
        wait_until(lambda: hooks.status(notification.id, endpoint_id) == "delivered", what="delivered")
    delivery = hooks.delivery(notification.id, endpoint_id)
    assert delivery.attempts == 4 and delivery.last_status_code == 200
    assert [r.status for r in flaky.received] == [500, 500, 500, 200]
    assert set(flaky.ids()) == {notification.id}  # the same webhook-id on every attempt
    assert all(r.verified_by for r in flaky.received)


@pytest.fixture
def gone() -> Iterator[Receiver]:
    """Answers 410 with a body until the test fixes it."""
    yield from serve(Receiver(answer=lambda n: (410, {}, b"no such hook " + b"x" * 5000)))


def test_a_permanent_answer_is_dead_lettered_and_replayed_with_the_same_id(hooks: Hooks, gone: Receiver) -> None:
    pipeline = hooks.pipeline
    endpoint_id = hooks.endpoint(gone)
    with pipeline.worker():
        pipeline.submit([pipeline.account()])
        (record,) = wait_until(lambda: pipeline.dead_letters(kind="webhook"), what="the webhook dead letter")
        assert len(gone.received) == 1  # 410 is permanent: no retry
        assert record.payload["status"] == 410 and record.payload["endpoint_id"] == endpoint_id
        assert record.last_error.startswith("HTTP 410: no such hook") and len(record.last_error) < 1100
        assert record.job_type == "deliver_webhook" and record.tenant_id == "tenant-1"
        notification_id = record.payload["notification_id"]
        assert hooks.delivery(notification_id, endpoint_id).status == "failed"

        gone.answer = lambda n: 200
        report = replay(pipeline.clients, [record])
        assert len(report.replayed) == 1, report.skipped
        wait_until(lambda: hooks.status(notification_id, endpoint_id) == "delivered", what="redelivered")
    assert gone.ids() == [notification_id, notification_id]
    assert pipeline.dead_letters(kind="webhook", status="open") == []


def test_one_delivery_per_notification_and_endpoint(
    hooks: Hooks, receiver: Receiver, second_receiver: Receiver, third_receiver: Receiver
) -> None:
    pipeline = hooks.pipeline
    first, second = hooks.endpoint(receiver), hooks.endpoint(second_receiver, events="sync.succeeded,event.cancelled")
    hooks.endpoint(third_receiver, events="sync.dead_lettered")  # not subscribed to sync.succeeded: never called
    with pipeline.worker():
        pipeline.submit([pipeline.account()])
        (notification,) = wait_until(lambda: hooks.notifications(), what="the notification")
        wait_until(lambda: receiver.received and second_receiver.received, what="both deliveries")
        # A receiver has the request before the worker records its answer: wait for both records.
        wait_until(lambda: {hooks.delivery(notification.id, e).status for e in (first, second)} == {"delivered"},
                   what="both deliveries recorded")  # fmt: skip
        assert hooks.deliverer().dispatch(notification.id) == []
        with pipeline.clients.db.read() as conn:
            assert store.count_deliveries(conn) == {"delivered": 2}
    assert receiver.ids() == [notification.id] and second_receiver.ids() == [notification.id]
    assert {hooks.delivery(notification.id, e).status for e in (first, second)} == {"delivered"}
    assert third_receiver.received == []


def test_a_signing_secret_the_worker_cannot_open_holds_the_delivery_until_one_can(
    hooks_factory: Any, receiver: Receiver, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(unreadable_secrets, "HOLD_SECONDS", 0.2)
    caplog.set_level(logging.ERROR, "calsync.core.store.unreadable_secrets")
    other = generate_key()
    hooks = hooks_factory()
    pipeline = hooks.pipeline
    stored_elsewhere = Endpoints.from_settings(pipeline.clients.db, CredentialCipher(other), pipeline.settings)
    secret, endpoint = stored_elsewhere.add("tenant-1", receiver.url, ["sync.succeeded"])
    receiver.secrets.append(secret)
    with pipeline.worker():
        pipeline.submit([pipeline.account()])
        (notification,) = wait_until(lambda: hooks.notifications(), what="the notification")
        wait_until(lambda: hooks.status(notification.id, endpoint.id) == "pending" and caplog.records,
                   what="the delivery held for its unreadable secret")  # fmt: skip
    assert pipeline.dead_letters() == [] and receiver.received == []
    assert f"webhook endpoint {endpoint.id}" in caplog.records[0].getMessage()

    keys = WEBHOOK_TEST_SETTINGS["secret_key"] + "," + other
    with_both = hooks_factory(secret_keys=keys).pipeline
    with with_both.worker():
        wait_until(lambda: hooks.status(notification.id, endpoint.id) == "delivered", what="delivered")
    assert receiver.received[0].verified_by == [secret] and with_both.dead_letters() == []

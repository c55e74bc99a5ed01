"""``CALSYNC_RABBITMQ_QUEUE_TYPE=quorum`` on the machine's RabbitMQ: every queue calsync declares (each lane, the
intake and webhook queues, each with its delay and dead-letter queue) is a quorum queue, and a change still flows
through them, a failed attempt's retry through the delay queue included."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pika
import pika.exceptions
import pytest
from dramatiq.brokers.rabbitmq import DEAD_MESSAGE_TTL

from calsync.core.messaging.rabbitmq_consumer import DELIVERY_LIMIT
from tests.conftest import RABBITMQ_URL
from tests.support import Pipeline

pytestmark = pytest.mark.rabbitmq_only


@pytest.fixture
def quorum(settings_factory: Any) -> Iterator[Pipeline]:
    suffix = uuid.uuid4().hex[:8]
    settings = settings_factory(rabbitmq_queue_type="quorum", intake_queue=f"in{suffix}", webhook_queue=f"wh{suffix}")
    pipeline = Pipeline(settings)
    yield pipeline
    pipeline.close()
    _delete(f"{name}{end}" for name in (settings.intake_queue, settings.webhook_queue) for end in ("", ".DQ", ".XQ"))


def _channel() -> Any:
    return pika.BlockingConnection(pika.URLParameters(RABBITMQ_URL)).channel()


def _delete(names: Any) -> None:
    channel = _channel()
    for name in names:
        channel.queue_delete(name)
    channel.connection.close()


def _declared(name: str, arguments: dict[str, Any]) -> str:
    """RabbitMQ's answer to declaring ``name`` again with ``arguments``: it accepts only the queue's own type and
    arguments (a different type, delivery limit, TTL or dead-letter route is refused)."""
    channel = _channel()
    try:
        channel.queue_declare(name, durable=True, arguments=arguments)
    except pika.exceptions.ChannelClosedByBroker as refused:
        return f"{refused.reply_code} {refused.reply_text}"
    finally:
        if channel.connection.is_open:
            channel.connection.close()
    return "accepted"


def test_every_queue_is_a_quorum_queue_and_a_retried_change_syncs_through_them(quorum: Pipeline) -> None:
    account = quorum.account()
    quorum.provider.add_fault(error="unavailable", times=1)  # the first attempt fails: its retry waits in .DQ
    quorum.submit([account], entity_id="evt-1")
    with quorum.worker():
        quorum.wait_target("evt-1", account, "synced", timeout=60)
    assert [call.error for call in quorum.provider.calls()] == ["ProviderUnavailable", None]
    settings = quorum.settings
    for queue in (settings.queue, settings.effective_bulk_queue, settings.intake_queue, settings.webhook_queue):
        for name in (queue, f"{queue}.DQ"):
            assert _declared(name, _quorum_arguments(queue)) == "accepted", name
        assert _declared(f"{queue}.XQ", {"x-queue-type": "quorum", "x-message-ttl": DEAD_MESSAGE_TTL}) == "accepted"
    refused = _declared(settings.queue, {**_quorum_arguments(settings.queue), "x-queue-type": "classic"})
    assert refused.startswith("406") and "x-queue-type" in refused  # the check above tells the types apart


def _quorum_arguments(queue: str) -> dict[str, Any]:
    return {"x-dead-letter-exchange": "", "x-dead-letter-routing-key": f"{queue}.XQ", "x-queue-type": "quorum",
            "x-delivery-limit": DELIVERY_LIMIT}  # fmt: skip

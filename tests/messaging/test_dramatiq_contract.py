"""The private parts of Dramatiq that calsync's consumers rely on, pinned: this fails loudly on a Dramatiq upgrade
that changes any of them.

Each broker's reliances are listed in the docstring of the one module that has them
(core/messaging/redis_consumer.py, core/messaging/rabbitmq_consumer.py). When a test here fails, read that list
against the new Dramatiq's source, adapt the module, then this test. No service is needed: the consumers are built
on recording stand-ins, which also shows that Dramatiq's constructors, acks and nacks still do what the modules
expect of them. (What the Redis keys hold is checked live by tests/redis/test_broker_maintenance.py and
tests/integration/test_poison.py.)
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import dramatiq
import dramatiq.brokers.rabbitmq
import dramatiq.brokers.redis
import pytest
from dramatiq.brokers.rabbitmq import RabbitmqBroker, _RabbitmqConsumer, _RabbitmqMessage
from dramatiq.brokers.redis import RedisBroker, _RedisConsumer

CONSUMER_ARGUMENTS = ["self", "broker", "queue_name", "prefetch", "timeout"]
READ_IN = "2.2"  # the Dramatiq release whose source the two modules' lists were checked against


class Recording:
    """Answers every attribute with a function that records its call: a broker, connection or channel stand-in."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: self.calls.append((name, *args, *kwargs.items()))


def _message(**options: Any) -> dramatiq.Message[Any]:
    return dramatiq.Message(queue_name="calendar", actor_name="a", args=(), kwargs={}, options=options)


def _arguments(function: Any) -> list[str]:
    return list(inspect.signature(function).parameters)


def test_the_lists_were_checked_against_the_installed_dramatiq() -> None:
    # pyproject allows only this release's patches; a new one may change any private part without notice.
    assert dramatiq.__version__.rsplit(".", 1)[0] == READ_IN, (
        f"Dramatiq {dramatiq.__version__}: check the private names listed in core/messaging/redis_consumer.py and "
        f"rabbitmq_consumer.py against its source, then set READ_IN (and pyproject's pin)"
    )


@pytest.mark.parametrize("broker", [RedisBroker, RabbitmqBroker])
def test_each_broker_builds_its_consumers_from_the_consumer_class_property(broker: type[dramatiq.Broker]) -> None:
    assert isinstance(inspect.getattr_static(broker, "consumer_class"), property)
    assert "self.consumer_class(self, queue_name, prefetch, timeout)" in inspect.getsource(broker.consume)


def test_the_redis_consumer_is_built_and_acks_as_redis_consumer_py_expects() -> None:
    assert _arguments(_RedisConsumer.__init__) == CONSUMER_ARGUMENTS
    broker = Recording()
    consumer = _RedisConsumer(broker, "calendar.DQ", 3, 100)  # type: ignore[no-untyped-call]
    assert (consumer.message_cache, consumer.queued_message_ids, consumer.misses) == ([], set(), 0)
    assert (consumer.prefetch, consumer.timeout, consumer.outstanding_message_count) == (3, 100, 0)
    acked, nacked = (
        dramatiq.MessageProxy(_message(redis_message_id="r1")),
        dramatiq.MessageProxy(_message(redis_message_id="r2")),
    )
    consumer.queued_message_ids.update({acked.message_id, nacked.message_id})
    consumer.message_cache = [("r3", b"{}")]
    assert consumer.outstanding_message_count == 3
    consumer.ack(acked)
    consumer.nack(nacked)
    # By the queued id, on the consumer's own queue (a delayed message is acked on the delay queue).
    assert broker.calls == [("do_ack", "calendar.DQ", "r1"), ("do_nack", "calendar.DQ", "r2")]
    assert consumer.queued_message_ids == set()
    assert "__next__" in vars(_RedisConsumer) and "close" not in vars(_RedisConsumer)  # ours replaces both


def test_the_redis_dispatch_script_keeps_its_arguments_and_key_layout() -> None:
    broker = RedisBroker(namespace="contract")  # registers its scripts; connects on first use only
    assert {"dispatch"} <= set(broker.scripts)
    assert {"broker_id", "namespace", "heartbeat_timeout", "dead_message_ttl", "client"} <= set(vars(broker))
    assert callable(broker.do_ack) and callable(broker.do_nack) and callable(broker.do_requeue)
    script = (Path(dramatiq.brokers.redis.__file__).parent / "redis" / "dispatch.lua").read_text()
    argv = "args=[command, timestamp, queue_name, worker_id, heartbeat_timeout, dead_message_ttl, do_maintenance, "
    assert f"--   {argv}max_unpack_size, ...]" in script
    for layout in (
        'local acks = namespace .. ":__acks__." .. worker_id',
        'local heartbeats = namespace .. ":__heartbeats__"',
        'local queue_acks = acks .. "." .. queue_name',
        'local queue_full_name = namespace .. ":" .. queue_name',
        'local queue_messages = queue_full_name .. ".msgs"',
        'if do_maintenance == "1" then',
        'elseif command == "requeue" then',
    ):
        assert layout in script, layout
    fetch = script[script.index('elseif command == "fetch" then') : script.index('elseif command == "requeue"')]
    assert 'redis.call("lpop", queue_full_name)' in fetch and 'redis.call("sadd", queue_acks, message_id)' in fetch


def test_the_rabbitmq_consumer_is_built_and_acks_as_rabbitmq_consumer_py_expects(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert _arguments(_RabbitmqConsumer.__init__) == CONSUMER_ARGUMENTS
    assert _arguments(_RabbitmqMessage.__init__) == ["self", "redelivered", "tag", "message"]
    channel = Recording()
    connection = Recording()
    connection.channel = lambda: channel  # type: ignore[method-assign]
    channel.consume = lambda queue, inactivity_timeout: iter(())  # type: ignore[method-assign]
    monkeypatch.setattr(dramatiq.brokers.rabbitmq.pika, "BlockingConnection", lambda parameters: connection)
    consumer = _RabbitmqConsumer(RabbitmqBroker(url="amqp://contract"), "calendar", 2, 500)  # type: ignore[no-untyped-call]
    assert (consumer.connection, consumer.channel, consumer.known_tags) == (connection, channel, set())
    assert list(consumer.iterator) == []
    assert ("basic_qos", ("prefetch_count", 2)) in channel.calls
    delivery = _RabbitmqMessage(True, 7, _message())  # type: ignore[no-untyped-call]
    assert isinstance(delivery, dramatiq.MessageProxy) and delivery.redelivered and delivery.message_id
    consumer.known_tags.add(7)
    consumer.ack(delivery)
    [(name, ack)] = connection.calls
    ack()  # on the connection's thread, as pika runs it
    assert name == "add_callback_threadsafe" and channel.calls[-1] == ("basic_ack", 7)
    assert consumer.known_tags == set()
    assert RabbitmqBroker(url="amqp://contract").queues_pending == set()
    assert "__next__" in vars(_RabbitmqConsumer)  # ours replaces it; ack, nack, requeue and close are Dramatiq's


def test_the_rabbitmq_queue_declarations_are_where_quorum_queues_override_them() -> None:
    assert _arguments(RabbitmqBroker._build_queue_arguments) == ["self", "queue_name"]
    assert _arguments(RabbitmqBroker._declare_xq_queue) == ["self", "queue_name"]
    for declare in (RabbitmqBroker._declare_queue, RabbitmqBroker._declare_dq_queue):
        assert "self._build_queue_arguments(queue_name)" in inspect.getsource(declare)
    assert "self._declare_xq_queue(canonical_queue_name)" in inspect.getsource(RabbitmqBroker._ensure_queue)
    assert isinstance(dramatiq.brokers.rabbitmq.DEAD_MESSAGE_TTL, int)

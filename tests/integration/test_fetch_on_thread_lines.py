"""The consumer's fetch on its own thread connection (core/messaging/redis_consumer.py ``fetch_with``)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest
import redis

from calsync.core.messaging.redis_consumer import SafeRedisBroker
from calsync.core.redis.thread_connections import ThreadConnections
from tests.integration import test_ack_later
from tests.integration.test_ack_later import QUEUE, fetched, unacked

broker = test_ack_later.broker  # the same broker fixtures
private_broker = test_ack_later.private_broker


class Counted(ThreadConnections):
    """Thread connections that count the scripts run through them."""

    def __init__(self, client: redis.Redis) -> None:
        super().__init__(client)
        self.scripts = 0

    def script(self, sha: str, text: str, keys: Sequence[str], args: Sequence[Any]) -> Any:
        self.scripts += 1
        return super().script(sha, text, keys, args)


@pytest.fixture
def lines(broker: SafeRedisBroker) -> Iterator[Counted]:
    counted = Counted(broker.client)
    broker.fetch_with(counted)
    yield counted
    counted.close()


def test_a_fetch_on_the_thread_s_line_pops_pairs_into_the_ack_set(broker: SafeRedisBroker, lines: Counted) -> None:
    ids = fetched(broker, 3)
    assert lines.scripts == 1 and unacked(broker) == set(ids)


def test_a_fetch_after_a_script_flush_loads_the_script_again(private_broker: SafeRedisBroker) -> None:
    lines = Counted(private_broker.client)
    private_broker.fetch_with(lines)
    try:
        assert fetched(private_broker, 1) and lines.scripts == 1
        private_broker.client.script_flush()  # as after a Redis restart: EVAL caches the fetch script again
        assert fetched(private_broker, 2) and lines.scripts == 2
    finally:
        lines.close()


def test_a_dropped_line_is_replaced_once_then_reads_as_a_connection_error(
    broker: SafeRedisBroker, lines: Counted, monkeypatch: pytest.MonkeyPatch
) -> None:
    fetched(broker, 1)  # opens this thread's connection
    connection = lines.connection()
    broker.client.client_kill("{}:{}".format(*connection._sock.getsockname()))  # as a restart or idle timeout
    assert fetched(broker, 1) and lines.scripts == 3  # the dropped attempt, then one on a new connection

    def dropped(*args: Any) -> Any:
        raise OSError("connection reset")

    monkeypatch.setattr(lines, "call", dropped)
    with pytest.raises(redis.ConnectionError):  # what the consumer restarts on
        broker.fetch_pairs(QUEUE, 1)

"""The Redis consumer fetches once a quarter of its prefetch is free, not after every ack (one fetch script and one
heartbeat per few deliveries while a backlog drains); a one-thread prefetch still fetches after every ack, a delay
queue's large prefetch once a few slots are free."""

from __future__ import annotations

from typing import Any

import pytest

from calsync.core.messaging import redis_consumer
from calsync.core.messaging.redis_consumer import _SafeRedisConsumer


class _NoSleep:
    """The consumer's ``time``: its back-off returns at once."""

    def sleep(self, _seconds: float) -> None:
        return None


class _Broker:
    """The consumer's view of a broker: no pause, no outage watch, a fetch that records what it was asked for."""

    middleware: list[Any] = []

    def __init__(self) -> None:
        self.asked: list[int] = []

    def fetch_pairs(self, queue_name: str, count: int) -> list[tuple[str, bytes | None]]:
        self.asked.append(count)
        return []


@pytest.mark.parametrize(
    ("prefetch", "outstanding", "asked"),
    [(16, 14, []), (16, 12, [4]), (16, 0, [16]), (2, 1, [1]), (2, 2, []), (8000, 7993, []), (8000, 7992, [8])],
)
def test_a_fetch_waits_for_a_quarter_of_the_prefetch(
    monkeypatch: pytest.MonkeyPatch, prefetch: int, outstanding: int, asked: list[int]
) -> None:
    monkeypatch.setattr(redis_consumer, "time", _NoSleep())
    broker = _Broker()
    consumer = _SafeRedisConsumer(broker, "calendar", prefetch, 100)  # type: ignore[arg-type]
    consumer.queued_message_ids.update(f"m{i}" for i in range(outstanding))
    assert next(consumer) is None
    assert broker.asked == asked
    # Waiting for slots to free up is no miss: an empty queue's back-off does not grow meanwhile.
    assert consumer.misses == (0 if 0 < prefetch - outstanding < consumer.refill else 1)

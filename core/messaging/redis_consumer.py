"""Dramatiq's RedisBroker with a consumer that no message can poison.

Dramatiq's fetch returns the bodies of the ids it popped, not the ids, so a body it cannot decode (or
whose ``redis_message_id`` is missing or wrong) can be neither acked nor rejected: it stays in the
worker's ack set and the ``.msgs`` hash. This consumer fetches ``(id, body)`` pairs with a script of
its own that keeps Dramatiq's key layout and heartbeat (§3.2 of the facts, docs/notes/dramatiq.md
§poison), puts every body through the :class:`~core.messaging.quarantine.Door`, acks what it
quarantined by the queued id, and runs Dramatiq's own maintenance with Dramatiq's probability, and
at least every ``maintenance_interval`` seconds per queue: Dramatiq's maintenance requeues a dead
worker's messages only for the queue of the call that drew it, so with a draw per fetch (about one a
second on an idle queue) a crashed worker's job could wait 20 s more than the heartbeat timeout in one
trial of 14 (docs/notes/locks.md); the interval bounds that wait.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any, Final

import redis
from dramatiq.broker import MessageProxy
from dramatiq.brokers.redis import RedisBroker, _RedisConsumer
from dramatiq.common import compute_backoff, current_millis
from dramatiq.errors import ConnectionClosed

from calsync.core.messaging.batch import Outgoing
from calsync.core.messaging.hold import ConsumerHold, hold_of
from calsync.core.messaging.quarantine import Arrival, Door, Quarantined, QuarantineUnavailable
from calsync.core.messaging.redis_batch import RedisBatch, run_maintenance

log = logging.getLogger(__name__)

# Same ARGV as Dramatiq's dispatch.lua (command, timestamp, queue, worker id, heartbeat timeout, dead
# message ttl, do_maintenance, max unpack size, prefetch); returns id1, body1, id2, body2, ... (a body
# is nil when the id has none). Fetched ids go to the worker's ack set exactly as Dramatiq's fetch does.
_FETCH_PAIRS: Final = """
local namespace = KEYS[1]
local timestamp = ARGV[2]
local queue_name = ARGV[3]
local worker_id = ARGV[4]
local prefetch = math.min(tonumber(ARGV[9]), tonumber(ARGV[8]))
redis.call("zadd", namespace .. ":__heartbeats__", timestamp, worker_id)
local queue_acks = namespace .. ":__acks__." .. worker_id .. "." .. queue_name
local queue_full_name = namespace .. ":" .. queue_name
local queue_messages = queue_full_name .. ".msgs"
local result = {}
for i = 1, prefetch do
    local message_id = redis.call("lpop", queue_full_name)
    if not message_id then
        break
    end
    redis.call("sadd", queue_acks, message_id)
    table.insert(result, message_id)
    table.insert(result, redis.call("hget", queue_messages, message_id))
end
return result
"""


class SafeRedisBroker(RedisBroker):
    """A RedisBroker whose consumers admit only messages a worker thread can run (the rest is quarantined)."""

    def __init__(
        self, *, max_message_bytes: int, maintenance_interval: float, overflow: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> None:  # fmt: skip
        super().__init__(**kwargs)  # type: ignore[no-untyped-call]
        self.door = Door(self, max_message_bytes, dict(overflow or {}))
        self._fetch_pairs = self.client.register_script(_FETCH_PAIRS)
        self._maintenance_interval = maintenance_interval
        self._last_maintenance: dict[str, float] = {}  # queue -> monotonic time; one consumer thread per queue
        self._batch = RedisBatch(self)

    def enqueue_many(self, outgoing: Sequence[Outgoing]) -> list[bool]:
        """Enqueue a batch in one script call per chunk (core/messaging/redis_batch.py); per message, whether sent."""
        return self._batch.enqueue_many(outgoing)

    @property
    def consumer_class(self) -> type[_SafeRedisConsumer]:
        """Dramatiq's extension point for the consumer a queue gets."""
        return _SafeRedisConsumer

    def _maintenance_due(self, queue_name: str) -> bool:
        now = time.monotonic()
        if self._should_do_maintenance("fetch") or now - self._last_maintenance.get(queue_name, 0.0) >= (
            self._maintenance_interval
        ):
            self._last_maintenance[queue_name] = now
            return True
        return False

    def fetch_pairs(self, queue_name: str, count: int) -> list[tuple[str, bytes | None]]:
        """Pop up to ``count`` ids with their bodies (Dramatiq's fetch, keeping the ids)."""
        now = current_millis()
        common = [now, queue_name, self.broker_id, self.heartbeat_timeout, self.dead_message_ttl]
        unpack = self._max_unpack_size()  # type: ignore[no-untyped-call]
        if self._maintenance_due(queue_name):
            run_maintenance(self, queue_name, now)  # exactly what Dramatiq's own fetch would have run
        flat = self._fetch_pairs(keys=[self.namespace], args=["fetch", *common, 0, unpack, count])
        return [(flat[i].decode("utf-8", "replace"), flat[i + 1]) for i in range(0, len(flat), 2)]


class _SafeRedisConsumer(_RedisConsumer):
    """Dramatiq's Redis consumer, fed ``(id, body)`` pairs that go through the door before anything else."""

    broker: SafeRedisBroker

    def __init__(self, broker: SafeRedisBroker, queue_name: str, prefetch: int, timeout: int) -> None:
        super().__init__(broker, queue_name, prefetch, timeout)  # type: ignore[no-untyped-call]
        self.hold: ConsumerHold | None = hold_of(broker)  # consumers are built after the middleware

    def __next__(self) -> MessageProxy | None:
        try:
            if self._held():
                return None
            while True:
                if self.message_cache:
                    self.misses = 0
                    message_id, body = self.message_cache.pop(0)
                    admitted = self._admit(message_id, body)
                    if admitted is not None:
                        return admitted
                    continue
                if self.outstanding_message_count < self.prefetch:
                    self.message_cache = self.broker.fetch_pairs(
                        self.queue_name, self.prefetch - self.outstanding_message_count
                    )
                if not self.message_cache:
                    self.misses, backoff_ms = compute_backoff(self.misses, max_backoff=self.timeout)
                    time.sleep(backoff_ms / 1000)
                    return None
        except redis.ConnectionError as e:
            raise ConnectionClosed(e) from None  # type: ignore[no-untyped-call]

    def _held(self) -> bool:
        """While the hold is on: prefetched ids go back to the queue, nothing is fetched, Dramatiq's beat goes on."""
        if self.hold is None or not self.hold.holding(self.queue_name):
            return False
        self._give_back_prefetched()
        self.broker.fetch_pairs(self.queue_name, 0)  # beats (our ack set stays ours) and runs maintenance
        time.sleep(self.timeout / 1000)
        return True

    def _give_back_prefetched(self) -> None:
        pending = [message_id for message_id, _ in self.message_cache]
        self.message_cache = []
        if pending:
            self.broker.do_requeue(self.queue_name, *pending)

    def _admit(self, message_id: str, body: bytes | None) -> MessageProxy | None:
        arrival = Arrival("redis", self.queue_name, message_id, f"LPOP {self.broker.namespace}:{self.queue_name}",
                          unique_id=True)  # fmt: skip
        admitted = self.broker.door.admit(body, arrival)
        if not isinstance(admitted, Quarantined):
            self.queued_message_ids.add(admitted.message_id)
            return MessageProxy(admitted)
        try:
            stored = self.broker.door.store(admitted)
        except QuarantineUnavailable:
            self.broker.do_requeue(self.queue_name, message_id)  # back to the tail; tried again later
            time.sleep(self.timeout / 1000)
            return None
        if stored:
            self.broker.do_ack(self.queue_name, message_id)
        else:
            self.broker.do_nack(self.queue_name, message_id)
        return None

    def close(self) -> None:
        """Give fetched but never handed out ids back to the queue (Dramatiq leaves them to maintenance)."""
        try:
            self._give_back_prefetched()
        except redis.ConnectionError:
            log.warning("could not requeue prefetched messages; maintenance will", exc_info=True)

"""Dramatiq's RedisBroker with a consumer that no message can poison; the one module that relies on the
private parts of Dramatiq's Redis broker.

Dramatiq's fetch returns the bodies of the ids it popped, not the ids, so a body it cannot decode (or
whose ``redis_message_id`` is missing or wrong) can be neither acked nor rejected: it stays in the
worker's ack set and the ``.msgs`` hash. This consumer fetches ``(id, body)`` pairs (``fetch_pairs.lua``,
Dramatiq's fetch keeping the ids) and puts every body through the :class:`~core.messaging.quarantine.Door`.
What the door admits carries the queued id in ``options.redis_message_id``, so Dramatiq's own ack and
nack handle it; what it refuses is stored by the quarantine, then acked by its queued id
(docs/notes/dramatiq.md §poison).

Dramatiq's maintenance (requeueing a dead worker's unacked messages) runs inside its dispatch calls, for
the queue of the call. This consumer's fetch is not a dispatch call, so it runs Dramatiq's maintenance for
its queue at least every ``maintenance_interval`` seconds: a SIGKILLed worker's job is back within that
interval plus one fetch once the worker's heartbeat is older than ``heartbeat_timeout``
(docs/notes/dramatiq.md §redis-recovery).

Reliance on Dramatiq's private API (read in Dramatiq 2.2's source; pinned by
tests/messaging/test_dramatiq_contract.py, which fails on an upgrade that changes any of it):

- ``dramatiq.brokers.redis._RedisConsumer``, subclassed: its constructor ``(broker, queue_name, prefetch,
  timeout)``, its ``ack``/``nack`` (by ``options["redis_message_id"]``, on the consumer's queue), its
  attributes ``message_cache``, ``queued_message_ids``, ``misses``, ``prefetch``, ``timeout`` and
  ``outstanding_message_count``: the consumer replaces only ``__next__`` and ``close``.
- ``RedisBroker.consumer_class``: the property ``consume()`` builds each queue's consumer from.
- dispatch.lua's key layout (the id list ``<ns>:<q>``, the bodies ``<ns>:<q>.msgs``, the ack set
  ``<ns>:__acks__.<broker_id>.<q>``, the beats ``<ns>:__heartbeats__``), which ``fetch_pairs.lua`` writes
  exactly as Dramatiq's fetch does.
- ``broker.scripts["dispatch"]`` and its ARGV order (command, timestamp, queue, broker id, heartbeat
  timeout, dead message TTL, do_maintenance, max unpack size), to run the maintenance of one queue.
- ``broker.do_ack`` / ``do_nack`` / ``do_requeue``: dispatch commands reached through
  ``RedisBroker.__getattr__``, for deliveries that never became a message.
"""

from __future__ import annotations

import importlib.resources
import logging
import time
from collections.abc import Mapping
from functools import partial
from typing import Any, Final

import dramatiq
import redis
from dramatiq.brokers.redis import RedisBroker, _RedisConsumer
from dramatiq.common import compute_backoff, current_millis
from dramatiq.errors import ConnectionClosed

from calsync.core.config.redis_url import redis_address, redis_client
from calsync.core.messaging.consumer_pause import pause_of
from calsync.core.messaging.outage import RedisOutage, outage_of
from calsync.core.messaging.quarantine import Arrival, Door, Quarantined

log = logging.getLogger(__name__)

FETCH_PAIRS: Final = importlib.resources.files(__package__).joinpath("fetch_pairs.lua").read_text()
#: dispatch.lua's ``max_unpack_size``: how many expired XQ ids its maintenance deletes per Lua ``unpack``.
UNPACK_CHUNK: Final = 1000
#: The most free prefetch slots a consumer waits for before it fetches (see ``_SafeRedisConsumer.refill``).
REFILL_MAX: Final = 8


class SafeRedisBroker(RedisBroker):
    """A RedisBroker whose consumers admit only messages a worker thread can run (the rest is quarantined)."""

    def __init__(
        self,
        *,
        url: str,
        max_message_bytes: int,
        maintenance_interval: float,
        overflow: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(client=redis_client(url), **kwargs)  # type: ignore[no-untyped-call]  # a Sentinel's too
        self.address = redis_address(url)  # in outage log lines
        self.door = Door(self, max_message_bytes, dict(overflow or {}))
        self.maintenance_interval = maintenance_interval
        self._fetch_pairs = self.client.register_script(FETCH_PAIRS)
        self._maintained_at: dict[str, float] = {}  # queue -> monotonic time; one consumer thread per queue

    @property
    def consumer_class(self) -> type[_SafeRedisConsumer]:
        """Dramatiq's extension point for the consumer a queue gets."""
        return _SafeRedisConsumer

    def fetch_pairs(self, queue_name: str, count: int) -> list[tuple[str, bytes | None]]:
        """Pop up to ``count`` ids with their bodies into this broker's ack set (Dramatiq's fetch, keeping the ids);
        first run the queue's maintenance when it is due."""
        now = current_millis()
        if time.monotonic() - self._maintained_at.get(queue_name, 0.0) >= self.maintenance_interval:
            self._maintained_at[queue_name] = time.monotonic()
            argv = ["requeue", now, queue_name, self.broker_id, self.heartbeat_timeout, self.dead_message_ttl, 1]
            self.scripts["dispatch"](keys=[self.namespace], args=[*argv, UNPACK_CHUNK])  # no ids: maintenance only
        flat = self._fetch_pairs(keys=[self.namespace], args=[now, queue_name, self.broker_id, count])
        return [(flat[i].decode("utf-8", "replace"), flat[i + 1]) for i in range(0, len(flat), 2)]


class _SafeRedisConsumer(_RedisConsumer):
    """Dramatiq's Redis consumer, fed ``(id, body)`` pairs that go through the door before anything else."""

    broker: SafeRedisBroker

    def __init__(self, broker: SafeRedisBroker, queue_name: str, prefetch: int, timeout: int) -> None:
        super().__init__(broker, queue_name, prefetch, timeout)  # type: ignore[no-untyped-call]
        self.pause = pause_of(broker)  # consumers are built after the middleware
        self.outage = outage_of(broker)
        # Fetch once a quarter of the prefetch is free, not after every ack: one fetch script (and one beat)
        # per few deliveries while a backlog drains, with every thread busy and more waiting (Dramatiq's
        # prefetch is 2 x threads). A prefetch of 2 or 3 (one thread) fetches after every ack, as Dramatiq does;
        # a delay queue's (1000 x threads) once REFILL_MAX are free: it seldom holds that many.
        self.refill = max(1, min(prefetch // 4, REFILL_MAX))

    def __next__(self) -> dramatiq.MessageProxy | None:
        try:
            if self.pause is not None and self.pause.paused(self.queue_name):
                self._wait_paused()
                return None
            while True:
                if self.message_cache:
                    self.misses = 0
                    message = self._admit(*self.message_cache.pop(0))
                    if message is not None:
                        return message
                    continue
                free = self.prefetch - self.outstanding_message_count
                if free >= self.refill:
                    self.message_cache = self.broker.fetch_pairs(self.queue_name, free)
                if not self.message_cache:
                    if 0 < free < self.refill:  # more slots are about to be free: look again soon, not a miss
                        backoff_ms = compute_backoff(0, max_backoff=self.timeout)[1]
                    else:  # the queue is empty, or the prefetch full: Dramatiq's growing back-off
                        self.misses, backoff_ms = compute_backoff(self.misses, max_backoff=self.timeout)
                    time.sleep(backoff_ms / 1000)
                    return None
        except redis.ConnectionError as e:
            if self.outage is None:
                raise ConnectionClosed(e) from None  # type: ignore[no-untyped-call]
            self._wait_for_redis(self.outage, e)
            return None

    def _wait_for_redis(self, outage: RedisOutage, error: redis.ConnectionError) -> None:
        """Wait (backing off) until Redis answers this consumer's fetch again, or the worker shuts down."""
        outage.lost(self.broker.address, error)
        attempt = 0
        while outage.wait(attempt):
            attempt += 1
            try:
                self.broker.fetch_pairs(self.queue_name, 0)  # fetches nothing: beats
            except redis.ConnectionError:
                continue
            outage.answered(self.broker.address)
            return
        time.sleep(self.timeout / 1000)  # shutting down: the consumer thread stops after this turn

    def _wait_paused(self) -> None:
        """Prefetched ids go back to the queue, nothing is fetched, Dramatiq's beat goes on (our ack set stays ours)."""
        self._give_back_prefetched()
        self.broker.fetch_pairs(self.queue_name, 0)
        time.sleep(self.timeout / 1000)

    def _give_back_prefetched(self) -> None:
        pending = [message_id for message_id, _ in self.message_cache]
        self.message_cache = []
        if pending:
            self.broker.do_requeue(self.queue_name, *pending)

    def _admit(self, message_id: str, body: bytes | None) -> dramatiq.MessageProxy | None:
        arrival = Arrival(
            "redis", self.queue_name, message_id, f"LPOP {self.broker.namespace}:{self.queue_name}", unique_id=True
        )
        admitted = self.broker.door.admit(body, arrival)
        if isinstance(admitted, Quarantined):
            broker, queue = self.broker, self.queue_name
            broker.door.quarantine(admitted, ack=partial(broker.do_ack, queue, message_id),
                                   reject=partial(broker.do_nack, queue, message_id),
                                   keep=partial(broker.do_requeue, queue, message_id),  # to the tail; tried later
                                   pause=self.timeout / 1000)  # fmt: skip
            return None
        self.queued_message_ids.add(admitted.message_id)
        return dramatiq.MessageProxy(admitted)

    def close(self) -> None:
        """Give fetched but never handed out ids back to the queue (Dramatiq leaves them to maintenance)."""
        try:
            self._give_back_prefetched()
        except redis.ConnectionError:
            log.warning("could not requeue prefetched messages; maintenance will", exc_info=True)

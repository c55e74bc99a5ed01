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

In a worker the fetch runs on the consumer thread's own connection (:meth:`SafeRedisBroker.fetch_with`):
193 Python calls per fetch through redis-py's client, 50 on the thread's connection (cProfile,
2026-12-02; a consumer fetches about once per job at full prefetch). An ack is sent without waiting for
Redis' answer when the broker is given a sender (:meth:`SafeRedisBroker.send_acks_with`; the runtime
gives workers one connection per thread, core/redis/thread_connections.py): the worker thread goes on to
its next job, and the answer is read before that thread's next command on the connection. An ack is
Dramatiq's own dispatch script, so its effect is Dramatiq's. If the answer is an error (Redis forgot the
script) or never comes (the connection dropped), the ack is sent again, waiting, before the next one: an
ack is idempotent, and an ack never made only means the message would be delivered again, which the
job's idempotency record makes harmless.
"""

from __future__ import annotations

import collections
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Protocol

import redis
from dramatiq.broker import MessageProxy
from dramatiq.brokers.redis import RedisBroker, _RedisConsumer
from dramatiq.common import compute_backoff, current_millis
from dramatiq.errors import ConnectionClosed

from calsync.core.messaging.batch import Outgoing
from calsync.core.messaging.hold import ConsumerHold, hold_of
from calsync.core.messaging.hooks import HookedEmitter
from calsync.core.messaging.outage import RedisOutage, outage_of, redis_address
from calsync.core.messaging.proxy import FieldedProxy
from calsync.core.messaging.quarantine import Arrival, Door, Quarantined, QuarantineUnavailable
from calsync.core.messaging.redis_batch import RedisBatch, dispatch_argv, run_maintenance

log = logging.getLogger(__name__)

# A dropped connection, as the thread connections raise it (redis-py wraps socket errors; OSError for the rest).
_DROPPED: Final = (redis.ConnectionError, redis.TimeoutError, OSError)

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


class LaterSender(Protocol):
    """Sends a command without waiting; ``on_answer`` gets its reply, or the error, later (ThreadConnections)."""

    def send_later(self, args: Sequence[str | int | float | bytes], on_answer: Callable[[Any], None]) -> None:
        """Send ``args``; raise a connection error if they could not be sent."""


class ScriptRunner(Protocol):
    """Runs a script on the calling thread's own connection and waits for its answer (ThreadConnections)."""

    def script(self, sha: str, text: str, keys: Sequence[str], args: Sequence[str | int | float | bytes]) -> Any:
        """The script's answer; Redis errors raised, a dropped connection as a connection error or OSError."""


class SafeRedisBroker(HookedEmitter, RedisBroker):
    """A RedisBroker whose consumers admit only messages a worker thread can run (the rest is quarantined)."""

    def __init__(
        self, *, max_message_bytes: int, maintenance_interval: float, overflow: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> None:  # fmt: skip
        super().__init__(**kwargs)
        self.address = redis_address(kwargs["url"]) if kwargs.get("url") else "redis"  # in outage log lines
        self.door = Door(self, max_message_bytes, dict(overflow or {}))
        self._fetch_pairs = self.client.register_script(_FETCH_PAIRS)
        self._maintenance_interval = maintenance_interval
        self._last_maintenance: dict[str, float] = {}  # queue -> monotonic time; one consumer thread per queue
        self._batch = RedisBatch(self)
        self._ack_sender: LaterSender | None = None
        self._fetcher: ScriptRunner | None = None
        self._acks_to_redo: collections.deque[tuple[str, str]] = collections.deque()  # (queue, id), any thread

    def send_acks_with(self, sender: LaterSender) -> None:
        """Send acks without waiting for their answers, through ``sender`` (workers; see the module docstring)."""
        self._ack_sender = sender

    def fetch_with(self, runner: ScriptRunner) -> None:
        """Fetch on the consumer thread's own connection (workers): without redis-py's per-command machinery."""
        self._fetcher = runner

    def ack(self, queue_name: str, message_id: str) -> None:
        """Dramatiq's ack of ``message_id``, sent without waiting when a sender is set (else as Dramatiq does)."""
        self._redo_acks()
        if self._ack_sender is None:
            self.do_ack(queue_name, message_id)
            return
        # Never with maintenance, as Dramatiq's own do_ack.
        args = dispatch_argv(self, "ack", queue_name, current_millis(), maintenance=False, args=[message_id])

        def answered(answer: Any) -> None:
            if isinstance(answer, BaseException):
                self._acks_to_redo.append((queue_name, message_id))

        try:
            self._ack_sender.send_later(("EVALSHA", self.scripts["dispatch"].sha, 1, self.namespace, *args), answered)
        except _DROPPED:
            self.do_ack(queue_name, message_id)  # not sent: once more, waiting, on a new connection

    def close(self) -> None:
        """Redo the acks still owed (their sender closed first, see Runtime.close), then close as Dramatiq does."""
        try:
            self._redo_acks()
        except redis.RedisError:
            log.warning("could not redo acks; their messages are delivered again", exc_info=True)
        super().close()

    def _redo_acks(self) -> None:
        # Acks whose answer was an error or never came; Dramatiq's do_ack loads a forgotten script again.
        while self._acks_to_redo:
            try:
                queue_name, message_id = self._acks_to_redo.popleft()
            except IndexError:  # another thread took the last one
                return
            try:
                self.do_ack(queue_name, message_id)
            except redis.RedisError:
                self._acks_to_redo.appendleft((queue_name, message_id))
                raise

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
        self._redo_acks()  # an idle worker's consumer thread redoes them too
        if self._maintenance_due(queue_name):
            run_maintenance(self, queue_name, now)  # exactly what Dramatiq's own fetch would have run
        argv = dispatch_argv(self, "fetch", queue_name, now, maintenance=False, args=[count])
        if self._fetcher is None:
            flat = self._fetch_pairs(keys=[self.namespace], args=argv)
        else:
            flat = self._fetch_on_line(self._fetcher, argv)
        return [(flat[i].decode("utf-8", "replace"), flat[i + 1]) for i in range(0, len(flat), 2)]

    def _fetch_on_line(self, fetcher: ScriptRunner, argv: list[Any]) -> Any:
        # Once more on a new connection after a dropped one, as redis-py's client retries; then the consumer
        # restarts, as for its own connection errors. (A first attempt that landed left its ids in this
        # worker's ack set, as with the client's retry: they return when the worker restarts.)
        try:
            return fetcher.script(self._fetch_pairs.sha, _FETCH_PAIRS, [self.namespace], argv)
        except _DROPPED:
            try:
                return fetcher.script(self._fetch_pairs.sha, _FETCH_PAIRS, [self.namespace], argv)
            except _DROPPED as exc:
                raise redis.ConnectionError(f"fetch failed twice: {exc}") from exc


class _SafeRedisConsumer(_RedisConsumer):
    """Dramatiq's Redis consumer, fed ``(id, body)`` pairs that go through the door before anything else."""

    broker: SafeRedisBroker

    def __init__(self, broker: SafeRedisBroker, queue_name: str, prefetch: int, timeout: int) -> None:
        super().__init__(broker, queue_name, prefetch, timeout)  # type: ignore[no-untyped-call]
        self.hold: ConsumerHold | None = hold_of(broker)  # consumers are built after the middleware
        self.outage: RedisOutage | None = outage_of(broker)

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
                self.broker.fetch_pairs(self.queue_name, 0)  # fetches nothing: beats, redoes owed acks
            except redis.ConnectionError:
                continue
            outage.answered(self.broker.address)
            return
        time.sleep(self.timeout / 1000)  # shutting down: the consumer thread stops after this turn

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
            return FieldedProxy(admitted)
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

    def ack(self, message: MessageProxy) -> None:
        """Ack by the queued id on this consumer's queue (Dramatiq's rule), through the broker's sender."""
        try:
            self.broker.ack(self.queue_name, message.options["redis_message_id"])
        except redis.ConnectionError as e:
            raise ConnectionClosed(e) from None  # type: ignore[no-untyped-call]
        finally:
            self.queued_message_ids.discard(message.message_id)

    def close(self) -> None:
        """Give fetched but never handed out ids back to the queue (Dramatiq leaves them to maintenance)."""
        try:
            self._give_back_prefetched()
        except redis.ConnectionError:
            log.warning("could not requeue prefetched messages; maintenance will", exc_info=True)

"""A batch of messages onto Dramatiq's Redis queues in one script call, instead of one dispatch call each.

Dramatiq's ``RedisBroker.enqueue`` runs its dispatch script once per message: a round trip each, so a
change fanned out to 100 accounts spent about half its ``submit_change`` time in 100 enqueues
(benchmarks/fanout.py; docs/notes/performance.md §fan-out). This hand-made path writes exactly what
dispatch.lua's ``enqueue`` writes, for up to ``CHUNK`` messages per script call: the broker's beat in
``<ns>:__heartbeats__``, each body in the ``<ns>:<queue>.msgs`` hash and its id at the tail of the
``<ns>:<queue>`` list, in order (a delayed message on ``<queue>.DQ`` with its ``eta`` option, as
``RedisBroker.enqueue`` would), and draws Dramatiq's maintenance per queue of the call with
Dramatiq's probability, running Dramatiq's own script for it. Key names are built in the script from
the namespace, as in Dramatiq's scripts (the messaging layer does not import core.redis). A script
call is atomic, so a chunk is either enqueued whole or not at all; a failed chunk does not stop the next.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Final
from uuid import uuid4

import dramatiq
from dramatiq.brokers.redis import RedisBroker
from dramatiq.common import current_millis, dq_name

from calsync.core.messaging.batch import Outgoing

log = logging.getLogger(__name__)

CHUNK: Final = 500  # messages per script call: 1,000 arguments, well inside Lua's unpack limit

# KEYS[1]: the namespace. ARGV: timestamp, broker id, then per queue: its name, n, and n (id, body) pairs.
_ENQUEUE_MANY: Final = """
local namespace = KEYS[1]
redis.call("zadd", namespace .. ":__heartbeats__", ARGV[1], ARGV[2])
local i = 3
while i <= #ARGV do
    local queue = namespace .. ":" .. ARGV[i]
    local n = tonumber(ARGV[i + 1])
    local first = i + 2
    local ids = {}
    for j = 0, n - 1 do
        ids[j + 1] = ARGV[first + 2 * j]
    end
    redis.call("hset", queue .. ".msgs", unpack(ARGV, first, first + 2 * n - 1))
    redis.call("rpush", queue, unpack(ids))
    i = first + 2 * n
end
return 1
"""


def _prepared(message: dramatiq.Message[Any], delay_ms: int | None, now: int) -> dramatiq.Message[Any]:
    """The message as ``RedisBroker.enqueue`` would store it: a fresh ``redis_message_id``; delayed: on .DQ with eta."""
    options = {**message.options, "redis_message_id": str(uuid4())}
    if delay_ms is None:
        return message.copy(options=options)
    return message.copy(queue_name=dq_name(message.queue_name), options={**options, "eta": now + delay_ms})


class RedisBatch:
    """Batch enqueues for one Redis broker (its client, namespace, broker id and middleware)."""

    def __init__(self, broker: RedisBroker) -> None:
        self._broker = broker
        self._script = broker.client.register_script(_ENQUEUE_MANY)

    def enqueue_many(self, outgoing: Sequence[Outgoing]) -> list[bool]:
        """Per message (in order), whether it was enqueued; ``CHUNK`` messages per script call."""
        sent: list[bool] = []
        for start in range(0, len(outgoing), CHUNK):
            chunk = outgoing[start : start + CHUNK]
            try:
                self._send(chunk)
            except Exception:
                log.exception("batch enqueue failed", extra={"fields": {"messages": len(chunk)}})
                sent.extend([False] * len(chunk))
            else:
                sent.extend([True] * len(chunk))
        return sent

    def _send(self, chunk: Sequence[Outgoing]) -> None:
        broker = self._broker
        now = current_millis()
        messages = [_prepared(message, delay_ms, now) for message, delay_ms in chunk]
        for message, (_, delay_ms) in zip(messages, chunk, strict=True):
            broker.emit_before("enqueue", message, delay_ms)
        by_queue: dict[str, list[str | bytes]] = {}
        for message in messages:
            by_queue.setdefault(message.queue_name, []).extend(
                (message.options["redis_message_id"], message.encode())
            )
        args: list[Any] = [now, broker.broker_id]
        for queue, pairs in by_queue.items():
            args.extend((queue, len(pairs) // 2, *pairs))
            self._maybe_maintain(queue, now)
        self._script(keys=[broker.namespace], args=args)
        for message, (_, delay_ms) in zip(messages, chunk, strict=True):
            broker.emit_after("enqueue", message, delay_ms)

    def _maybe_maintain(self, queue: str, now: int) -> None:
        # What one dispatch call of Dramatiq's would have drawn.
        if self._broker._should_do_maintenance("enqueue"):
            run_maintenance(self._broker, queue, now)


def dispatch_argv(broker: RedisBroker, command: str, queue: str, now: int, *, maintenance: bool,
                  args: Sequence[Any] = ()) -> list[Any]:  # fmt: skip
    """ARGV of Dramatiq's dispatch script (and of scripts that mirror it): command, timestamp, queue, worker
    id, heartbeat timeout, dead message TTL, do_maintenance, max unpack size, then the command's own."""
    unpack = broker._max_unpack_size()  # type: ignore[no-untyped-call]
    return [command, now, queue, broker.broker_id, broker.heartbeat_timeout, broker.dead_message_ttl,
            int(maintenance), unpack, *args]  # fmt: skip


def run_maintenance(broker: RedisBroker, queue: str, now: int) -> None:
    """Dramatiq's own maintenance for ``queue`` (it runs inside any dispatch call; "requeue" with no ids does
    nothing else)."""
    broker.scripts["dispatch"](keys=[broker.namespace], args=dispatch_argv(broker, "requeue", queue, now,
                                                                             maintenance=True))  # fmt: skip

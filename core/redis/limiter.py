"""A counting semaphore per key in Redis, with leases: at most N holders per key across every worker process.

Each holder is a member of a sorted set scored by its lease expiry (Redis server time, so worker clocks do
not matter). Acquiring drops expired leases first, so a worker killed while holding a slot blocks it for
at most the lease. Releasing removes only the holder's own member. Waiting is a short poll bounded by
``wait``; after it the caller gets :class:`~calsync.core.model.errors.ConcurrencyLimited` (a deferral, no
attempt used). Keys come from :meth:`RedisKeys.slots`. It limits the Graph adapter's HTTP requests; the
per-account limit on whole provider calls is traffic control's (core/redis/traffic.py).

The acquire script and the release run on the worker thread's own connection (core/redis/thread_connections.py;
in a worker the lock manager's, actors/worker.py), not through redis-py's per-command machinery: the slot
was 8.2 % of a Graph worker's CPU (py-spy, issue 15). Measured gain (2026-12-02, one thread, the machine's
Redis): a slot taken and given back cost 316 Python calls, 90-130 µs of CPU and 2 waited round trips; now
67 calls, 23-40 µs and 1 (a Graph create, benchmarks/graph_calls.py: 2,129 → 1,880 calls). The acquire is
sent once more on a new connection if it was dropped, marked as such: the script then answers "yours" when
the token already holds a slot, so a lost answer never holds two. The release (``ZREM``) is sent without
waiting: Redis runs it before this thread's next command, so the thread's next acquire sees the slot free;
if it could not be sent it is sent again, waiting, on a new connection; if only its answer is lost, the
slot, freed or not, expires with its lease.
"""

from __future__ import annotations

import contextlib
import itertools
import secrets
import time
from collections.abc import Iterator
from typing import Any

import redis

from calsync.core.model.errors import ConcurrencyLimited, StoreUnavailable
from calsync.core.redis.keys import RedisKeys
from calsync.core.redis.thread_connections import DROPPED, ThreadConnections, script_sha

# KEYS: the slots; ARGV: the limit, the lease in ms, the holder's token, 1 when sent again after a dropped
# connection (a slot the token already holds is then its own). 1: the token holds a slot.
_ACQUIRE = """
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now_ms)
if (ARGV[4] == '1' and redis.call('ZSCORE', KEYS[1], ARGV[3])) or redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('ZADD', KEYS[1], now_ms + tonumber(ARGV[2]), ARGV[3])
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]) * 2)
  return 1
end
return 0
"""
_ACQUIRE_SHA = script_sha(_ACQUIRE)
_POLL_START, _POLL_MAX = 0.005, 0.1


class RedisLimiter:
    """At most ``limit`` concurrent slots per key, shared by every process on this Redis namespace."""

    def __init__(self, client: redis.Redis, keys: RedisKeys, *, limit: int, lease: float, wait: float,
                 connections: ThreadConnections | None = None) -> None:  # fmt: skip
        self._client = client
        self._keys = keys
        self._limit = limit
        self._lease_ms = max(1, int(lease * 1000))
        self._wait = wait
        # A worker passes the lock manager's (closed with it); otherwise the limiter has its own.
        self._own = connections is None
        self._lines = connections if connections is not None else ThreadConnections(client)
        self._nonce = secrets.token_hex(8)
        self._serial = itertools.count(1)

    def holders(self, key: str) -> int:
        """How many unexpired leases ``key`` has right now (tests, ``calsync status``)."""
        name = self._keys.slots(key)
        try:
            now_ms = int(self._client.time()[0]) * 1000
            return int(self._client.zcount(name, now_ms, "+inf"))
        except redis.RedisError as exc:
            raise StoreUnavailable(f"Redis unreachable reading slots of {key}: {type(exc).__name__}") from exc

    @contextlib.contextmanager
    def slot(self, key: str) -> Iterator[None]:
        """Hold one of ``key``'s slots for the block (a lease of ``lease`` seconds), waiting up to ``wait``."""
        name = self._keys.slots(key)
        token = f"{self._nonce}:{next(self._serial)}"
        deadline = time.monotonic() + self._wait
        pause = _POLL_START
        try:
            while not self._take(name, token):
                if time.monotonic() + pause > deadline:
                    raise ConcurrencyLimited(f"all {self._limit} slots of {key} are taken")
                time.sleep(pause)
                pause = min(pause * 2, _POLL_MAX)
        except (redis.RedisError, OSError) as exc:
            raise StoreUnavailable(f"Redis unreachable taking a slot of {key}: {type(exc).__name__}") from exc
        try:
            yield
        finally:
            self._release(name, token)

    def close(self) -> None:
        """Give back the threads' connections, if they are this limiter's own."""
        if self._own:
            self._lines.close()

    def _take(self, name: str, token: str) -> bool:
        try:
            return bool(self._lines.script(_ACQUIRE_SHA, _ACQUIRE, (name,), (self._limit, self._lease_ms, token, 0)))
        except DROPPED:  # once more on a new connection; a first attempt that landed answers "yours"
            return bool(self._lines.script(_ACQUIRE_SHA, _ACQUIRE, (name,), (self._limit, self._lease_ms, token, 1)))

    def _release(self, name: str, token: str) -> None:
        try:
            self._lines.send_later(("ZREM", name, token), _ignore)
        except DROPPED:  # it never reached Redis: once more, waiting, on a new connection
            with contextlib.suppress(redis.RedisError, OSError):  # the lease expires on its own
                self._lines.call("ZREM", name, token)


def _ignore(_answer: Any) -> None:
    # 1 or 0 (already expired), or a lost answer: either way the slot is free or expires with its lease.
    pass

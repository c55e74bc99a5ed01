"""A counting semaphore per key in Redis, with leases: at most N holders per key across every worker process.

Each holder is a member of a sorted set scored by its lease expiry (Redis server time, so worker clocks do
not matter). Acquiring (``slot_acquire.lua``) drops expired leases first, so a worker killed while holding a
slot blocks it for at most the lease. Releasing removes only the holder's own member. Waiting is a short poll
bounded by ``wait``; after it the caller gets :class:`~calsync.core.model.errors.ConcurrencyLimited` (a
deferral, no attempt used). Keys come from :meth:`RedisKeys.slots`. It limits the Graph adapter's HTTP
requests; the per-account limit on whole provider calls is traffic control's (core/traffic/).

A slot costs two round trips on the client's pool: the acquire (sent once more after a dropped connection,
core/redis/scripts.py: it then finds its own slot) and the release (``ZREM``). A release that fails leaves the
slot to expire with its lease.
"""

from __future__ import annotations

import contextlib
import itertools
import secrets
import time
from collections.abc import Iterator

import redis

from calsync.core.model.errors import ConcurrencyLimited, StoreUnavailable
from calsync.core.redis.keys import RedisKeys
from calsync.core.redis.scripts import LuaScript

_POLL_START, _POLL_MAX = 0.005, 0.1


class RedisLimiter:
    """At most ``limit`` concurrent slots per key, shared by every process on this Redis namespace."""

    def __init__(self, client: redis.Redis, keys: RedisKeys, *, limit: int, lease: float, wait: float) -> None:
        self._client = client
        self._keys = keys
        self._limit = limit
        self._lease_ms = max(1, int(lease * 1000))
        self._wait = wait
        self._acquire = LuaScript(client, __package__, "slot_acquire.lua")
        self._nonce = secrets.token_hex(8)
        self._serial = itertools.count(1)

    @contextlib.contextmanager
    def slot(self, key: str) -> Iterator[None]:
        """Hold one of ``key``'s slots for the block (a lease of ``lease`` seconds), waiting up to ``wait``."""
        name = self._keys.slots(key)
        token = f"{self._nonce}:{next(self._serial)}"
        deadline = time.monotonic() + self._wait
        pause = _POLL_START
        try:
            while not self._acquire([name], [self._limit, self._lease_ms, token]):
                if time.monotonic() + pause > deadline:
                    raise ConcurrencyLimited(f"all {self._limit} slots of {key} are taken")
                time.sleep(pause)
                pause = min(pause * 2, _POLL_MAX)
        except redis.RedisError as exc:
            raise StoreUnavailable(f"Redis unreachable taking a slot of {key}: {type(exc).__name__}") from exc
        try:
            yield
        finally:
            with contextlib.suppress(redis.RedisError):  # else the lease expires on its own
                self._client.zrem(name, token)

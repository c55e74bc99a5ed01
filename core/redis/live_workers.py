"""Which worker processes are alive: each one's heartbeat key, and the set that lists them.

A worker process renews its key ``<ns>:heartbeat:<host>:<pid>`` (a TTL of ``HEARTBEAT_TTL``) on every beat and
adds its name to the set ``<ns>:workers``; the key is the proof of life (the lock scripts check it with EXISTS),
the set is only where readers find the keys. Readers (the exporter's scrape, ``calsync status``) read the set and
the keys it names, and drop the names whose key has expired: their cost follows the number of workers, where a
SCAN for the keys' pattern walks every key of the Redis (the dedup markers and locks of the traffic included) on
every scrape. A name dropped in a race with its worker's beat is back on the next beat.
"""

from __future__ import annotations

import redis

from calsync.core.redis.keys import RedisKeys


def renew(client: redis.Redis, keys: RedisKeys, worker: str, value: str, *, ttl_ms: int) -> None:
    """One beat of ``worker``: its key set to ``value`` for ``ttl_ms``, its name in the set."""
    with client.pipeline(transaction=True) as pipe:
        pipe.set(keys.worker_heartbeat(worker), value, px=ttl_ms)
        pipe.sadd(keys.workers(), worker)
        pipe.execute()


def remove(client: redis.Redis, keys: RedisKeys, worker: str) -> None:
    """``worker`` stops on purpose: its key and its name go."""
    with client.pipeline(transaction=True) as pipe:
        pipe.delete(keys.worker_heartbeat(worker))
        pipe.srem(keys.workers(), worker)
        pipe.execute()


def read(client: redis.Redis, keys: RedisKeys) -> dict[str, bytes | str]:
    """The value of every live worker's key by worker name, sorted; the names whose key expired are dropped."""
    names = sorted(name.decode() if isinstance(name, bytes) else name for name in client.smembers(keys.workers()))
    values = client.mget([keys.worker_heartbeat(name) for name in names]) if names else []
    gone = [name for name, raw in zip(names, values, strict=True) if raw is None]
    if gone:
        client.srem(keys.workers(), *gone)
    return {name: raw for name, raw in zip(names, values, strict=True) if raw is not None}

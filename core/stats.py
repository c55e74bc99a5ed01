"""Per-minute job outcome counters in Redis, for ``calsync status`` and the demo's summary.

Prometheus is the real metrics pipeline; these counters exist so that people without Grafana can
still see recent throughput, and cost one pipelined round trip per finished job.
"""

from __future__ import annotations

import time
from collections import Counter

import redis

from core.keys import RedisKeys

_RETENTION_S = 86400


class JobStats:
    """Counts finished jobs by outcome, bucketed by minute."""

    def __init__(self, client: redis.Redis, keys: RedisKeys) -> None:
        self._client = client
        self._keys = keys
        self._expiring: str | None = None  # the bucket whose TTL this process already set

    def record(self, outcome: str, *, count: int = 1) -> None:
        """Count one finished job (one round trip; the bucket's TTL is set once per minute)."""
        key = self._keys.stats(int(time.time() // 60))
        if key == self._expiring:
            self._client.hincrby(key, outcome, count)
            return
        pipe = self._client.pipeline(transaction=False)
        pipe.hincrby(key, outcome, count)
        pipe.expire(key, _RETENTION_S)
        pipe.execute()
        self._expiring = key

    def totals(self, *, minutes: int = 60, now: float | None = None) -> Counter[str]:
        """Outcome counts over the last ``minutes`` minutes (current minute included)."""
        current = int((now if now is not None else time.time()) // 60)
        pipe = self._client.pipeline(transaction=False)
        for minute in range(current - minutes + 1, current + 1):
            pipe.hgetall(self._keys.stats(minute))
        totals: Counter[str] = Counter()
        for bucket in pipe.execute():
            for outcome, value in bucket.items():
                name = outcome.decode() if isinstance(outcome, bytes) else outcome
                totals[name] += int(value)
        return totals

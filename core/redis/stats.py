"""Per-minute job outcome counters in Redis, for ``calsync status`` and the demo's summary.

Prometheus is the real metrics pipeline; these counters exist so that people without Grafana can
still see recent throughput. Workers add outcomes up in memory and a background thread writes them
once a second in one pipelined round trip (a Redis round trip per job cost more than the rest of the
bookkeeping; benchmarks/pipeline.py), and on shutdown. A SIGKILLed worker loses at most its last
second of counts; Prometheus, scraped from the same process, has the same exposure.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter

import redis

from calsync.core.model.vocabulary import Outcome
from calsync.core.redis.keys import RedisKeys
from calsync.core.redis.periodic import start_repeating

log = logging.getLogger(__name__)

_RETENTION_S = 86400


class JobStats:
    """Counts finished jobs by outcome, bucketed by minute, written every ``flush_every`` seconds."""

    def __init__(self, client: redis.Redis, keys: RedisKeys, *, flush_every: float = 1.0) -> None:
        self._client = client
        self._keys = keys
        self._flush_every = flush_every
        self._pending: Counter[tuple[int, Outcome]] = Counter()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._flusher: threading.Thread | None = None

    def record(self, outcome: Outcome, *, count: int = 1) -> None:
        """Count finished jobs: written by the next flush (a thread the first count starts; ``close`` at the end)."""
        minute = int(time.time() // 60)
        with self._lock:
            self._pending[(minute, outcome)] += count
            if self._flusher is None and not self._stop.is_set():
                self._flusher = start_repeating("calsync-stats", self._stop, self._flush_every, self.flush, log=log,
                                                failure="could not write job outcome counters; will retry",
                                                errors=(redis.RedisError,))  # fmt: skip

    def flush(self) -> None:
        """Write the counts not yet in Redis; on a Redis error they stay pending for the next flush."""
        with self._lock:
            pending, self._pending = self._pending, Counter()
        if not pending:
            return
        pipe = self._client.pipeline(transaction=False)
        for (minute, outcome), count in pending.items():
            pipe.hincrby(self._keys.stats(minute), outcome, count)
            pipe.expire(self._keys.stats(minute), _RETENTION_S)
        try:
            pipe.execute()
        except redis.RedisError:
            oldest = int(time.time() - _RETENTION_S) // 60
            with self._lock:
                self._pending.update({key: n for key, n in pending.items() if key[0] >= oldest})
            raise

    def close(self) -> None:
        """Stop the flusher and write what is left (worker shutdown, end of process)."""
        self._stop.set()
        if self._flusher is not None:
            self._flusher.join(timeout=5)
        try:
            self.flush()
        except redis.RedisError:
            log.warning("job outcome counters lost at shutdown: Redis unavailable", exc_info=True)

    def per_minute(self, *, minutes: int = 60, now: float | None = None) -> list[Counter[str]]:
        """Outcome counts of each of the last ``minutes`` minutes, oldest first (current minute included): one
        pipelined round trip of ``minutes`` HGETALLs of small hashes, whatever the history."""
        current = int((now if now is not None else time.time()) // 60)
        pipe = self._client.pipeline(transaction=False)
        for minute in range(current - minutes + 1, current + 1):
            pipe.hgetall(self._keys.stats(minute))
        return [
            Counter({outcome.decode(): int(value) for outcome, value in bucket.items()}) for bucket in pipe.execute()
        ]

    def totals(self, *, minutes: int = 60, now: float | None = None) -> Counter[str]:
        """Outcome counts over the last ``minutes`` minutes (current minute included)."""
        return sum(self.per_minute(minutes=minutes, now=now), Counter())

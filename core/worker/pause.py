"""The worker side of ``calsync pause``: holds this process' consumers while the switch is on.

The consumers ask :meth:`PauseGate.holding` on every turn; the gate reads the switch (core/redis/pause.py)
at most once per ``refresh`` seconds, so a pause or a resume takes effect within about a second. Delay
queues are never held: a due retry only moves to its ready queue, where it waits like the rest. A queue
counts as held once its consumer has turned while the switch was on; the heartbeat reports
``"paused": true`` only when every consumed queue is held, which is what an operator (or a test) waits for.
If Redis cannot be read, the last known state stands.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Iterable

import dramatiq
import redis
from dramatiq.common import q_name

from calsync.core.messaging.outage import RedisWatch
from calsync.core.redis.pause import PauseSwitch

log = logging.getLogger(__name__)

REFRESH_SECONDS = 1.0


class PauseGate(dramatiq.Middleware):
    """The :class:`~core.messaging.hold.ConsumerHold` of a worker process, driven by the pause switch."""

    def __init__(self, switch: PauseSwitch, refresh: float = REFRESH_SECONDS, watch: RedisWatch | None = None) -> None:
        self.switch = switch
        self.refresh = refresh
        self.watch = watch  # an unreachable Redis is said there, once for the worker
        self._paused = False
        self._read_at = float("-inf")
        self._held: set[str] = set()
        self.turns: Counter[str] = Counter()  # held turns per queue since start (tests wait on these)
        self._lock = threading.Lock()
        self._unreadable = False

    def holding(self, queue_name: str) -> bool:
        """True while ``calsync pause`` is on, for every queue but the delay queues."""
        if q_name(queue_name) != queue_name:
            return False
        paused = self._current()
        if paused:
            with self._lock:
                self._held.add(queue_name)
                self.turns[queue_name] += 1
        return paused

    def paused_on(self, queues: Iterable[str]) -> bool:
        """Whether the switch is on and the consumer of every one of ``queues`` (delay queues aside) holds."""
        wanted = {q for q in queues if q_name(q) == q}
        with self._lock:
            return self._paused and wanted <= self._held

    def _current(self) -> bool:
        now = time.monotonic()
        if now - self._read_at < self.refresh:
            return self._paused
        with self._lock:
            if now - self._read_at < self.refresh:  # another consumer thread just read it
                return self._paused
            self._read_at = now
            try:
                paused = self.switch.state() is not None
            except redis.RedisError as exc:
                if isinstance(exc, redis.ConnectionError) and self.watch is not None:
                    self.watch.lost(exc)
                elif not self._unreadable:
                    log.warning("cannot read the pause switch; keeping its last state", exc_info=True,
                                extra={"fields": {"paused": self._paused}})  # fmt: skip
                self._unreadable = True
                return self._paused
            self._unreadable = False
            if paused != self._paused:
                self._held.clear()
                log.info("processing paused: no new deliveries until `calsync resume`" if paused
                         else "processing resumed")  # fmt: skip
            self._paused = paused
            return paused

"""The worker side of ``calsync pause``: pauses this process' consumers while the switch is on.

The consumers ask :meth:`PauseGate.paused` on every turn (core/messaging/consumer_pause.py); the gate reads
the switch (core/redis/pause.py) at most once per ``REFRESH_SECONDS``, so a pause or a resume takes effect
within about a second. Delay queues are never paused: a due retry only moves to its ready queue, where it
waits like the rest. A queue counts as paused once its consumer has turned while the switch was on; the
heartbeat reports ``"paused": true`` only when every consumed queue is, which is what an operator (or a
test) waits for. If Redis cannot be read, the last known state stands.
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
    """The :class:`~core.messaging.consumer_pause.ConsumerPause` of a worker process, driven by the pause switch."""

    def __init__(self, switch: PauseSwitch, watch: RedisWatch) -> None:
        self.switch = switch
        self.watch = watch  # an unreachable Redis is said there, once for the worker
        self.turns: Counter[str] = Counter()  # paused turns per queue since the switch last changed
        self._paused = False
        self._read_at = float("-inf")
        self._lock = threading.Lock()
        self._unreadable = False

    def paused(self, queue_name: str) -> bool:
        """True while ``calsync pause`` is on, for every queue but the delay queues."""
        if q_name(queue_name) != queue_name or not self._current():
            return False
        with self._lock:
            self.turns[queue_name] += 1
        return True

    def paused_on(self, queues: Iterable[str]) -> bool:
        """Whether the switch is on and the consumer of every one of ``queues`` (delay queues aside) is paused."""
        wanted = {q for q in queues if q_name(q) == q}
        with self._lock:
            return self._paused and wanted <= self.turns.keys()

    def _current(self) -> bool:
        with self._lock:
            now = time.monotonic()
            if now - self._read_at < REFRESH_SECONDS:
                return self._paused
            self._read_at = now
            try:
                paused = self.switch.state() is not None
            except redis.ConnectionError as exc:
                self.watch.lost(exc)
                return self._paused
            except redis.RedisError:
                if not self._unreadable:
                    log.warning("cannot read the pause switch; keeping its last state", exc_info=True)
                self._unreadable = True
                return self._paused
            self._unreadable = False
            if paused != self._paused:
                self.turns.clear()
                log.info(
                    "processing paused: no new deliveries until `calsync resume`" if paused else "processing resumed"
                )
            self._paused = paused
            return paused

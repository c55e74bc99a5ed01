"""A worker process' Redis outage: said once, waited out with a back-off, said again when it is over.

Dramatiq's consumer thread logs a critical line and restarts its consumer every 3 s while its broker is
unreachable, and each worker process has two consumers per queue (the queue and its delay queue); the
heartbeat and housekeeping threads added a warning with a traceback each round: one ``calsync stop`` of
the embedded Redis under a running worker wrote 96 critical lines in 30 s. With this middleware the
first thread that finds a Redis server unreachable logs one warning naming it, every consumer waits
for it (trying again after 0.5, 1, 2, 4 s, then every :data:`MAX_WAIT` s: each try is one refused
connection), the heartbeat and housekeeping threads only report to it, and the first success logs one
line saying how long it lasted. The consumers find it among the broker's middleware (:func:`outage_of`).

A consumer waits inside its fetch, so Dramatiq's consumer thread neither restarts nor releases the
delayed messages it holds while nothing could take them; from the worker's shutdown on, the wait ends
(the thread stops; its delayed messages return to the queue through Dramatiq's maintenance, as after
any lost connection).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

import dramatiq

from calsync.core.config.redis_url import redis_address

log = logging.getLogger(__name__)

FIRST_WAIT = 0.5
#: The longest a consumer waits between two tries: a restarted Redis is found within this many seconds.
MAX_WAIT = 5.0


def back_off(attempt: int) -> float:
    """Seconds to wait before try ``attempt`` + 1 (0-based) of a server that did not answer."""
    return float(min(MAX_WAIT, FIRST_WAIT * 2 ** min(attempt, 16)))


class RedisOutage(dramatiq.Middleware):
    """The Redis servers this worker process cannot reach right now, and since when."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._since: dict[str, float] = {}
        self._stopping = threading.Event()

    def lost(self, address: str, error: BaseException) -> None:
        """``address`` did not answer: logged only when it is the first failure since it last answered."""
        with self._lock:
            if address in self._since:
                return
            self._since[address] = time.monotonic()
        log.warning(
            "Redis unreachable: no job starts until it answers; this worker tries again every %.0f s at most and "
            "resumes by itself (an embedded Redis stopped by `calsync stop` comes back at the same address with the "
            "next `calsync worker`, `serve` or `submit`)",
            MAX_WAIT,
            extra={"fields": {"redis": address, "error": f"{type(error).__name__}: {error}"}},
        )

    def answered(self, address: str) -> None:
        """``address`` answered: logged only when it had been reported unreachable."""
        with self._lock:
            since = self._since.pop(address, None)
        if since is not None:
            unreachable = round(time.monotonic() - since, 1)
            log.info("Redis reachable again", extra={"fields": {"redis": address, "unreachable_seconds": unreachable}})

    def of(self, url: str) -> RedisWatch:
        """What a thread using the Redis at ``url`` reports to (the heartbeat, housekeeping)."""
        return RedisWatch(self, redis_address(url))

    def wait(self, attempt: int) -> bool:
        """Sleep before try ``attempt`` + 1; False (at once) when the worker is shutting down."""
        return not self._stopping.wait(back_off(attempt))

    def after_worker_boot(self, broker: dramatiq.Broker, worker: dramatiq.Worker) -> None:
        self._stopping.clear()

    def before_worker_shutdown(self, broker: dramatiq.Broker, worker: dramatiq.Worker) -> None:
        self._stopping.set()


@dataclass(frozen=True)
class RedisWatch:
    """One Redis server's side of a :class:`RedisOutage`."""

    outage: RedisOutage
    address: str

    def lost(self, error: BaseException) -> None:
        """The server did not answer (logged once per outage)."""
        self.outage.lost(self.address, error)

    def answered(self) -> None:
        """The server answered (logged when it ends an outage)."""
        self.outage.answered(self.address)


def outage_of(broker: dramatiq.Broker) -> RedisOutage | None:
    """The broker's :class:`RedisOutage` middleware, if it has one (workers do; producers do not)."""
    return next((m for m in broker.middleware if isinstance(m, RedisOutage)), None)

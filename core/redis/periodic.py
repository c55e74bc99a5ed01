"""Daemon threads that repeat one action at an interval until stopped, outliving the action's failures.

Lock renewal, heartbeats and the outcome counters each run one; a failed round (Redis briefly down)
is logged and the next round tries again. Only the first failure of a run of them is logged (with its
traceback), and the round that works again says how many failed: a Redis outage of minutes is two
lines per thread, not one every round.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable


def start_repeating(
    name: str,
    stop: threading.Event,
    interval: float,
    action: Callable[[], object],
    *,
    log: logging.Logger,
    failure: str,
    errors: tuple[type[Exception], ...] = (Exception,),
) -> threading.Thread:
    """A started daemon thread running ``action`` every ``interval`` s until ``stop`` is set; ``errors`` only log."""

    def repeat() -> None:
        failed = 0
        while not stop.wait(interval):
            try:
                action()
            except errors:
                if not failed:
                    log.warning(failure, exc_info=True)
                failed += 1
                continue
            if failed:
                log.info("%s: works again", name, extra={"fields": {"failed_rounds": failed}})
                failed = 0

    thread = threading.Thread(target=repeat, name=name, daemon=True)
    thread.start()
    return thread

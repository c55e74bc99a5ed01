"""Cleanup on SIGTERM and SIGHUP as on Ctrl-C, for a run that starts processes and writes to shared servers."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator


@contextlib.contextmanager
def cleanup_on_signals() -> Iterator[None]:
    """While open, SIGTERM and SIGHUP (``timeout``, a closed terminal, ``kill``) end the run with exit status
    128 + the signal, as Ctrl-C does, so every ``finally`` and exit stack still runs: worker process groups are
    stopped, keys and schemas removed, servers stopped. By default either signal ends Python without them.

    Outside the main thread (where no handler may be set) it does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    previous = {signum: signal.signal(signum, interrupt) for signum in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)

"""Dramatiq middleware that releases the provider adapters when the worker shuts down."""

from __future__ import annotations

from collections.abc import Callable

import dramatiq


class CloseOnShutdown(dramatiq.Middleware):
    """Calls ``close`` once the worker's threads have stopped, so no adapter call is still running."""

    def __init__(self, close: Callable[[], None]) -> None:
        self._close = close

    def after_worker_shutdown(self, broker: dramatiq.Broker, worker: dramatiq.Worker) -> None:
        """Dramatiq's hook after the worker threads joined."""
        self._close()

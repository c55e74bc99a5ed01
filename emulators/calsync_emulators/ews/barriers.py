"""Barriers: the next N requests for one SOAP operation wait for each other, to prove concurrency without timing.

An emulator feature of ours, not an Exchange one.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any


@dataclass
class _Barrier:
    operation: str
    barrier: threading.Barrier
    timeout: float
    slots: int


class Barriers:
    """The barriers set over the control API; shares the app's lock."""

    def __init__(self, lock: threading.RLock) -> None:
        self._lock = lock
        self._barriers: list[_Barrier] = []

    def reset(self) -> None:
        """Forget every barrier."""
        with self._lock:
            self._barriers = []

    def add(self, operation: str, parties: int, timeout_ms: int) -> None:
        """Make the next ``parties`` requests for ``operation`` wait for each other (up to ``timeout_ms``)."""
        with self._lock:
            self._barriers.append(_Barrier(operation, threading.Barrier(parties), timeout_ms / 1000, parties))

    def wait(self, op: str | None, log: dict[str, Any]) -> None:
        """Wait at the first barrier with a free slot for this operation; log ``met`` or ``broken``."""
        with self._lock:
            barrier = next((b for b in self._barriers if b.operation == op and b.slots > 0), None)
            if barrier is None:
                return
            barrier.slots -= 1
        try:
            barrier.barrier.wait(barrier.timeout)
            log["barrier"] = "met"
        except threading.BrokenBarrierError:
            log["barrier"] = "broken"

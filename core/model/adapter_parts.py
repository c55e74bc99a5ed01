"""What an adapter may be given by its composition root: a per-key concurrency limiter and a credentials writer.

Adapters import only the model, so the Redis limiter (core/redis/limiter.py) and the database writer
(core/store/accounts.py ``StoredCredentials``) reach them as these protocols, passed in by the provider registry.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Mapping
from typing import Any, Protocol

from calsync.core.model.errors import ConcurrencyLimited


class ConcurrencyLimiter(Protocol):
    """At most N concurrent holders per key (e.g. per (app, mailbox)), across every process sharing it."""

    def slot(self, key: str) -> contextlib.AbstractContextManager[None]:
        """Hold one of ``key``'s slots for the block; raises ConcurrencyLimited when none frees up in time."""
        ...


class CredentialWriter(Protocol):
    """Persists credentials an adapter was handed back by the provider (a rotated refresh token)."""

    def save(self, account_id: str, credentials: Mapping[str, Any]) -> None:
        """Store ``credentials`` as the account's new credentials (encrypted at rest)."""
        ...


class LocalLimiter:
    """A per-process limiter (one semaphore per key): the default when no shared limiter is given."""

    def __init__(self, limit: int, wait: float) -> None:
        self._limit = limit
        self._wait = wait
        self._semaphores: dict[str, threading.BoundedSemaphore] = {}
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def slot(self, key: str) -> Iterator[None]:
        """Hold one of ``key``'s slots in this process."""
        with self._lock:
            semaphore = self._semaphores.setdefault(key, threading.BoundedSemaphore(self._limit))
        if not semaphore.acquire(timeout=self._wait):
            raise ConcurrencyLimited(f"all {self._limit} slots of {key} are taken")
        try:
            yield
        finally:
            semaphore.release()


class DiscardCredentials:
    """A writer that keeps rotated credentials in memory only (adapters used without a database)."""

    def save(self, account_id: str, credentials: Mapping[str, Any]) -> None:
        """Forget them: the adapter's own cache still holds the rotated token for this process."""

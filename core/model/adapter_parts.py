"""What an adapter may be given by its composition root: a per-key concurrency limiter and a credentials writer.

Adapters import only the model, so the Redis limiter (core/redis/limiter.py) and the database writer
(core/store/accounts.py ``StoredCredentials``) reach them as these protocols, passed in by the provider registry.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any, Protocol


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


class DiscardCredentials:
    """A writer that keeps rotated credentials in memory only (adapters used without a database)."""

    def save(self, account_id: str, credentials: Mapping[str, Any]) -> None:
        """Forget them: the adapter's own cache still holds the rotated token for this process."""

"""What the Exchange adapter is configured with: a request timeout and the size of its connection pools."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class ExchangeSettings(Protocol):
    """The settings the adapter reads; :class:`ExchangeConfig` has them, and so has calsync's Settings."""

    @property
    def provider_timeout(self) -> float:
        """Seconds one EWS request may take."""
        ...

    @property
    def worker_threads(self) -> int:
        """Threads that may call the adapter at once: each mailbox pool holds this many connections."""
        ...


@dataclass(frozen=True)
class ExchangeConfig:
    """The Exchange adapter's configuration, built from Settings by the provider registry."""

    provider_timeout: float
    worker_threads: int

"""What the Exchange adapter is configured with: a request timeout and the size of its connection pools."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ExchangeConfig:
    """The Exchange adapter's configuration, built from Settings by the provider registry."""

    provider_timeout: float
    worker_threads: int

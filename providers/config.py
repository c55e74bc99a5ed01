"""What each adapter is configured with: its part of the settings, built by the provider registry (the one reader
of Settings), so an adapter never sees the rest. Importing this loads no client library."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class GoogleConfig:
    """The Google adapter's: a call timeout and, for emulators, the API endpoint."""

    provider_timeout: float
    google_api_endpoint: str | None


@dataclass(frozen=True)
class ExchangeConfig:
    """The Exchange adapter's: a request timeout and the size of its connection pools (one per worker thread)."""

    provider_timeout: float
    worker_threads: int


@dataclass(frozen=True)
class GraphConfig:
    """The Graph adapter's: endpoint, timeout, pool size, trust store and per-mailbox slots."""

    provider_timeout: float
    api_endpoint: str
    worker_threads: int
    ca_file: Path | None
    mailbox_concurrency: int
    slot_wait: float

"""What the Graph adapter is configured with: endpoint, timeout, pool size, trust store and per-mailbox slots."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class GraphConfig:
    """The Graph adapter's configuration, built from Settings by the provider registry."""

    provider_timeout: float
    api_endpoint: str = "https://graph.microsoft.com/v1.0/"
    worker_threads: int = 8
    ca_file: Path | None = None
    mailbox_concurrency: int = 4
    slot_wait: float = 2.0

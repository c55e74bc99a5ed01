"""What the Google adapter is configured with: a call timeout and, for emulators, the API endpoint."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GoogleConfig:
    """The Google adapter's configuration, built from Settings by the provider registry."""

    provider_timeout: float
    google_api_endpoint: str | None = None

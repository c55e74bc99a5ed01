"""What the Google adapter is configured with: a call timeout and, for emulators, the API endpoint."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class GoogleSettings(Protocol):
    """The settings the adapter reads; :class:`GoogleConfig` has them, and so has calsync's Settings."""

    @property
    def provider_timeout(self) -> float:
        """Seconds one HTTP exchange (API call or token refresh) may take."""
        ...

    @property
    def google_api_endpoint(self) -> str | None:
        """Base URL of Calendar v3 (an emulator's in tests and the demo); None for Google's own."""
        ...


@dataclass(frozen=True)
class GoogleConfig:
    """The Google adapter's configuration, built from Settings by the provider registry."""

    provider_timeout: float
    google_api_endpoint: str | None = None

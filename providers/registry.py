"""Which adapter serves which ``provider_accounts.provider`` value, built once per process."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from calsync.core.model.calendar import Provider, ProviderName
from calsync.core.model.errors import ConfigurationError

if TYPE_CHECKING:
    from calsync.core.config.settings import Settings


def _build(name: ProviderName, settings: Settings) -> Provider:
    # Imported lazily: a worker that only serves memory accounts never loads the Google or EWS stacks.
    if name == "memory":
        from calsync.providers.memory import MemoryProvider

        return MemoryProvider.from_settings(settings)
    if name == "google":
        from calsync.providers.google import GoogleProvider

        return GoogleProvider(settings)
    if name == "exchange":
        from calsync.providers.exchange import ExchangeProvider

        return ExchangeProvider(settings)
    raise ConfigurationError(f"unknown provider {name!r}")


class ProviderRegistry:
    """Adapters by name, created on first use and shared by all worker threads of a process."""

    def __init__(self, settings: Settings, overrides: dict[str, Provider] | None = None) -> None:
        self._settings = settings
        self._providers: dict[str, Provider] = dict(overrides or {})
        self._lock = threading.Lock()

    def get(self, name: ProviderName) -> Provider:
        """The adapter for ``name``, building it on first use."""
        provider = self._providers.get(name)
        if provider is None:
            with self._lock:
                provider = self._providers.get(name)
                if provider is None:
                    provider = self._providers[name] = _build(name, self._settings)
        return provider

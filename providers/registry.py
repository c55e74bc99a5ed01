"""Which adapter serves which ``provider_accounts.provider`` value, built once per process.

This is the one place that reads adapter configuration out of Settings: each adapter's constructor takes the
few values it uses and never sees the rest. An adapter's modules load its client library, so they are
imported where used: a worker loads only the stacks of the providers it serves.
"""

from __future__ import annotations

import importlib
import logging
import threading
from typing import Any

from calsync.core.config.settings import Settings
from calsync.core.model.account_rules import check_address
from calsync.core.model.adapter_parts import ConcurrencyLimiter, CredentialWriter
from calsync.core.model.calendar import Account, Provider, ProviderName
from calsync.core.model.errors import ConfigurationError

logger = logging.getLogger(__name__)


def _build(
    name: ProviderName,
    settings: Settings,
    limiter: ConcurrencyLimiter | None,
    credentials: CredentialWriter | None,
) -> Provider:
    # Imported here: a worker that only serves memory accounts never loads the Google or EWS stacks.
    if name == "memory":
        from calsync.providers.memory import MemoryProvider

        return MemoryProvider(settings.effective_memory_provider_path)
    if name == "google":
        from calsync.providers.google.provider import GoogleProvider

        return GoogleProvider(timeout=settings.provider_timeout, api_endpoint=settings.google_api_endpoint)
    if name == "exchange":
        from calsync.providers.exchange.provider import ExchangeProvider

        return ExchangeProvider(timeout=settings.provider_timeout, pool_size=settings.worker_threads)
    if name == "graph":
        from calsync.providers.graph.provider import GraphProvider

        return GraphProvider(
            settings.graph_api_endpoint,
            timeout=settings.provider_timeout,
            pool_size=settings.worker_threads,
            ca_file=settings.graph_ca_file,
            limiter=limiter,
            credentials=credentials,
        )
    raise ConfigurationError(f"unknown provider {name!r}")


#: Where each provider's account rules live: ``OPTIONS`` (the option names its accounts take, traffic control's
#: max_concurrency included) and ``check_account`` (its own checks of an account's fields).
_ACCOUNT_RULES: dict[ProviderName, str] = {
    "memory": "memory",
    "google": "google.credentials",
    "exchange": "exchange.account_config",
    "graph": "graph.credentials",
}


def _account_rules(provider: ProviderName) -> Any:
    # Imported on use: an adapter's account rules load its client library.
    return importlib.import_module(f"calsync.providers.{_ACCOUNT_RULES[provider]}")


def option_names(provider: ProviderName) -> frozenset[str]:
    """The options an account of ``provider`` may have (its adapter's, and traffic control's max_concurrency)."""
    return frozenset(_account_rules(provider).OPTIONS)


def validate_account(account: Account) -> None:
    """Refuse an account whose address, options or credentials the adapter cannot use (at ``accounts add``, not at
    a job): the address by its provider's rule (core/model/account_rules.py), any option the provider does not
    know (named, with the ones it knows), then the adapter's own checks."""
    check_address(account.id, account.provider, account.address)
    known = option_names(account.provider)
    unknown = sorted(set(account.options) - known)
    if unknown:
        raise ConfigurationError(
            f"account {account.id}: unknown option{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} "
            f"for provider {account.provider} (allowed: {', '.join(sorted(known))})"
        )
    own = account.options.get("max_concurrency")  # traffic control's per-account limit, any provider
    if own is not None and (not isinstance(own, int) or isinstance(own, bool) or own < 1):
        raise ConfigurationError(f"account {account.id}: option max_concurrency must be a whole number of 1 or more")
    _account_rules(account.provider).check_account(account)


def verify_account(account: Account, settings: Settings) -> None:
    """One live call with the account's credentials (a token, or EWS's cheapest request): refused → permanent
    error, unreachable → temporary error. Nothing is written."""
    validate_account(account)
    if account.provider == "memory":
        return  # nothing to ask
    provider = _build(account.provider, settings, None, None)
    try:
        provider.verify(account)  # type: ignore[attr-defined]  # every remote adapter has one; not a job's protocol
    finally:
        provider.close()


class ProviderRegistry:
    """Adapters by name, created on first use and shared by all worker threads of a process.

    ``limiter`` (per-mailbox slots shared by every worker) and ``credentials`` (where rotated tokens are
    stored) come from the composition root; without them the Graph adapter takes no slots (a one-off call such as
    ``accounts add --verify`` sends one token request) and keeps rotated tokens in memory.
    """

    def __init__(
        self,
        settings: Settings,
        overrides: dict[str, Provider] | None = None,
        *,
        limiter: ConcurrencyLimiter | None = None,
        credentials: CredentialWriter | None = None,
    ) -> None:
        self._settings = settings
        self._limiter = limiter
        self._credentials = credentials
        self._providers: dict[str, Provider] = dict(overrides or {})
        self._lock = threading.Lock()

    def get(self, name: ProviderName) -> Provider:
        """The adapter for ``name``, building it on first use."""
        with self._lock:
            if name not in self._providers:
                self._providers[name] = _build(name, self._settings, self._limiter, self._credentials)
            return self._providers[name]

    def close(self) -> None:
        """Close every adapter built or given so far, each once even when it serves several names (shutdown)."""
        with self._lock:
            served: dict[int, tuple[Provider, list[str]]] = {}
            for name, provider in self._providers.items():
                served.setdefault(id(provider), (provider, []))[1].append(name)
        for provider, names in served.values():
            try:
                provider.close()
            except Exception:  # one adapter failing to let go must not keep the others' connections open
                logger.exception("closing the adapter of %s failed", ", ".join(names))

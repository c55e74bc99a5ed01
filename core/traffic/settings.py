"""Traffic control settings: limits shared by every worker, circuit breakers; the :class:`Limits` one provider gets.

Per-provider values are written ``provider=value`` pairs, comma-separated (``graph=4,google=2``); a provider
left out keeps its default, 0 switches that limit off. Defaults follow the providers' published quotas
(docs/notes/traffic.md): Graph and Exchange Online allow 4 concurrent requests and 10,000 requests per
10 minutes per (app, mailbox), and 2,000 requests/s per app; Google allows 600 requests/min per user and
10,000/min per project. The memory provider has no limits by default, so its jobs never touch Redis for them.

This module imports nothing of calsync but core.model: ``core/config/settings.py`` mixes :class:`TrafficSettings`
into the one settings class.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Final, get_args

from pydantic import BaseModel, Field, NonNegativeFloat, NonNegativeInt, ValidationInfo, field_validator
from pydantic_settings import NoDecode

from calsync.core.model.calendar import ProviderName

PROVIDERS: Final[tuple[ProviderName, ...]] = get_args(ProviderName)

ACCOUNT_CONCURRENCY: Final[dict[ProviderName, int]] = {"google": 4, "exchange": 4, "graph": 4, "memory": 0}
ACCOUNT_RATE: Final[dict[ProviderName, float]] = {"google": 5.0, "exchange": 8.0, "graph": 8.0, "memory": 0.0}
PROVIDER_RATE: Final[dict[ProviderName, float]] = {"google": 100.0, "exchange": 0.0, "graph": 1000.0, "memory": 0.0}
BREAKER_FAILURES: Final[dict[ProviderName, int]] = {"google": 5, "exchange": 5, "graph": 5, "memory": 0}


def _per_provider(value: Any, defaults: dict[str, Any]) -> Any:
    """``provider=value`` pairs (or a mapping) laid over the field's defaults; the field's type checks the result
    (known providers only, each value 0 or more)."""
    if isinstance(value, str):
        given: dict[str, str] = {}
        for part in filter(None, (p.strip() for p in value.split(","))):
            name, sep, number = part.partition("=")
            if not sep:
                raise ValueError(f"{part!r} is not provider=value (e.g. graph=4,google=2)")
            given[name.strip()] = number.strip()
        value = given
    return {**defaults, **value} if isinstance(value, dict) else value


class TrafficSettings(BaseModel):
    """Per-account, per-tenant and per-provider limits, the provider back-off and the circuit breakers."""

    # Concurrent provider calls per account (an account's ``max_concurrency`` option overrides it).
    account_concurrency: Annotated[dict[ProviderName, NonNegativeInt], NoDecode] = ACCOUNT_CONCURRENCY
    # Token buckets, requests per second: per account, per provider (every account of it), per tenant.
    account_rate: Annotated[dict[ProviderName, NonNegativeFloat], NoDecode] = ACCOUNT_RATE
    provider_rate: Annotated[dict[ProviderName, NonNegativeFloat], NoDecode] = PROVIDER_RATE
    tenant_rate: float = Field(default=0, ge=0)
    # A full account waits this long before it asks again (also when a half-open breaker's probe is out).
    traffic_retry_delay: float = Field(default=1, gt=0, le=3600)
    # Consecutive temporary failures that open a breaker (per account, per provider); 0: no breaker.
    breaker_failures: Annotated[dict[ProviderName, NonNegativeInt], NoDecode] = BREAKER_FAILURES
    # How long an open breaker holds its jobs before one probe may go (a failed probe reopens it).
    breaker_open_seconds: float = Field(default=15, gt=0, le=3600)

    @field_validator("account_concurrency", "account_rate", "provider_rate", "breaker_failures", mode="before")
    @classmethod
    def _split(cls, value: Any, info: ValidationInfo) -> Any:
        return _per_provider(value, cls.model_fields[str(info.field_name)].get_default(call_default_factory=True))


@dataclass(frozen=True)
class Limits:
    """What holds one provider's calls (0: that limit is off); ``governed`` False means no Redis work at all."""

    concurrency: int = 0
    account_rate: float = 0
    tenant_rate: float = 0
    provider_rate: float = 0
    burst: float = 2  # a bucket holds this many seconds of its rate (at least one request): the burst it allows
    breaker_failures: int = 0
    breaker_open: float = 15
    retry_delay: float = 1
    lease: float = 60  # a slot or probe outlives the call; a killed worker's is freed after it

    @property
    def governed(self) -> bool:
        """Whether any limit or breaker applies to this provider."""
        return any((self.concurrency, self.account_rate, self.tenant_rate, self.provider_rate, self.breaker_failures))


def provider_limits(settings: TrafficSettings, *, lease: float) -> dict[str, Limits]:
    """Every provider's limits (a provider with none is left out: not governed); ``lease``: how long a call's slot
    or probe outlives it (the job time limit and a margin)."""
    limits: dict[str, Limits] = {}
    for name in PROVIDERS:
        provider = Limits(
            concurrency=settings.account_concurrency.get(name, 0),
            account_rate=settings.account_rate.get(name, 0),
            tenant_rate=settings.tenant_rate,
            provider_rate=settings.provider_rate.get(name, 0),
            breaker_failures=settings.breaker_failures.get(name, 0),
            breaker_open=settings.breaker_open_seconds,
            retry_delay=settings.traffic_retry_delay,
            lease=lease,
        )
        if provider.governed:
            limits[name] = provider
    return limits

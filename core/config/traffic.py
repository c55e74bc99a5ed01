"""Traffic control settings (issue 14): limits shared by every worker, circuit breakers.

Per-provider values are written ``provider=value`` pairs, comma-separated (``graph=4,google=2``); a provider
left out keeps its default, 0 switches that limit off. Defaults follow the providers' published quotas
(docs/notes/traffic.md): Graph and Exchange Online allow 4 concurrent requests and 10,000 requests per
10 minutes per (app, mailbox), and 2,000 requests/s per app; Google allows 600 requests/min per user and
10,000/min per project. The memory provider has no limits by default, so its jobs never touch Redis for them.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, get_args

from pydantic import BaseModel, Field, ValidationInfo, field_validator
from pydantic_settings import NoDecode

from calsync.core.model.calendar import ProviderName

PROVIDERS: Final[tuple[str, ...]] = get_args(ProviderName)

ACCOUNT_CONCURRENCY: Final = {"google": 4, "exchange": 4, "graph": 4, "memory": 0}
ACCOUNT_RATE: Final = {"google": 5.0, "exchange": 8.0, "graph": 8.0, "memory": 0.0}
PROVIDER_RATE: Final = {"google": 100.0, "exchange": 0.0, "graph": 1000.0, "memory": 0.0}
BREAKER_FAILURES: Final = {"google": 5, "exchange": 5, "graph": 5, "memory": 0}

_DEFAULTS: Final[dict[str, dict[str, float]]] = {
    "account_concurrency": dict(ACCOUNT_CONCURRENCY),
    "account_rate": dict(ACCOUNT_RATE),
    "provider_rate": dict(PROVIDER_RATE),
    "breaker_failures": dict(BREAKER_FAILURES),
}


def _per_provider(field: str, value: Any) -> dict[str, Any]:
    """``provider=value`` pairs (or a mapping) laid over the field's defaults; unknown providers are errors."""
    given: dict[str, Any]
    if isinstance(value, str):
        given = {}
        for part in filter(None, (p.strip() for p in value.split(","))):
            name, sep, number = part.partition("=")
            if not sep:
                raise ValueError(f"{part!r} is not provider=value (e.g. graph=4,google=2)")
            given[name.strip()] = number.strip()
    elif isinstance(value, dict):
        given = dict(value)
    else:
        raise ValueError("must be provider=value pairs, e.g. graph=4,google=2")
    unknown = sorted(set(given) - set(PROVIDERS))
    if unknown:
        raise ValueError(f"unknown provider {unknown[0]!r}; choose from {', '.join(PROVIDERS)}")
    return {**_DEFAULTS[field], **given}


def _non_negative(values: dict[str, float]) -> dict[str, float]:
    negative = sorted(name for name, number in values.items() if number < 0)
    if negative:
        raise ValueError(f"{negative[0]} must be 0 (off) or more, got {values[negative[0]]}")
    return values


class TrafficSettings(BaseModel):
    """Per-account, per-tenant and per-provider limits, the provider back-off and the circuit breakers."""

    # Concurrent provider calls per account (an account's ``max_concurrency`` option overrides it).
    account_concurrency: Annotated[dict[str, int], NoDecode] = Field(default_factory=lambda: dict(ACCOUNT_CONCURRENCY))
    # Token buckets, requests per second: per account, per provider (every account of it), per tenant.
    account_rate: Annotated[dict[str, float], NoDecode] = Field(default_factory=lambda: dict(ACCOUNT_RATE))
    provider_rate: Annotated[dict[str, float], NoDecode] = Field(default_factory=lambda: dict(PROVIDER_RATE))
    tenant_rate: float = Field(default=0, ge=0)
    # A bucket holds this many seconds of its rate (at least one request): the burst it allows.
    traffic_burst: float = Field(default=2, gt=0, le=3600)
    # A full account waits this long before it asks again (also when a half-open breaker's probe is out).
    traffic_retry_delay: float = Field(default=1, gt=0, le=3600)
    # Consecutive temporary failures that open a breaker (per account, per provider); 0: no breaker.
    breaker_failures: Annotated[dict[str, int], NoDecode] = Field(default_factory=lambda: dict(BREAKER_FAILURES))
    # How long an open breaker holds its jobs before one probe may go (a failed probe reopens it).
    breaker_open_seconds: float = Field(default=15, gt=0, le=3600)

    @field_validator("account_concurrency", "account_rate", "provider_rate", "breaker_failures", mode="before")
    @classmethod
    def _split(cls, value: Any, info: ValidationInfo) -> dict[str, Any]:
        return _per_provider(str(info.field_name), value)

    @field_validator("account_concurrency", "account_rate", "provider_rate", "breaker_failures")
    @classmethod
    def _check(cls, value: dict[str, float]) -> dict[str, float]:
        return _non_negative(value)

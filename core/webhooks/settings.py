"""Webhook settings (a mixin of :class:`~core.config.settings.Settings`): queue, SSRF rules, timeouts, retries.

It imports nothing of calsync, so core/config/settings.py may import it (the one import into this package
that pyproject's contracts allow besides the package's own ``__init__``).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import Annotated

from pydantic import BaseModel, Field, field_validator
from pydantic_settings import NoDecode

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_networks(values: Iterable[str]) -> tuple[Network, ...]:
    """Allow-listed networks (``CALSYNC_WEBHOOK_ALLOWED_NETWORKS``): addresses or CIDRs."""
    return tuple(ipaddress.ip_network(v.strip(), strict=False) for v in values if v.strip())


class WebhookSettings(BaseModel):
    """``CALSYNC_WEBHOOK_*``: how notifications are delivered (docs/PROTOCOL.md, "Webhooks")."""

    # The deliver_webhook actor's queue: a slow receiver never delays a calendar sync.
    webhook_queue: str = Field(default="webhooks", pattern=r"^[A-Za-z0-9_-]+$")
    # http:// receiver URLs (development only); https is required otherwise.
    webhook_allow_http: bool = False
    # Addresses or CIDRs a receiver may resolve to although they are loopback/private/link-local.
    # (comma-separated; a string, so child processes get it back verbatim).
    webhook_allowed_networks: str = ""
    webhook_timeout: float = Field(default=10, gt=0)  # the whole request, connect included
    # Delays (s) between attempts, comma-separated (split by Settings, as RETRY_SCHEDULE): one retry per entry,
    # ± RETRY_JITTER; Retry-After (429/503) is a floor.
    webhook_retry_schedule: Annotated[tuple[float, ...], NoDecode] = (5, 30, 120, 600, 1800, 3600, 10800)
    # The breaker: an endpoint failing for this long (and this many attempts in a row) is disabled.
    webhook_disable_after: float = Field(default=3 * 86400, gt=0)
    webhook_disable_min_failures: int = Field(default=10, ge=1)
    # How long the previous secret keeps signing after `calsync webhooks rotate-secret`.
    webhook_secret_grace: float = Field(default=86400, ge=0)

    @field_validator("webhook_allowed_networks")
    @classmethod
    def _check_webhook_networks(cls, value: str) -> str:
        parse_networks(value.split(","))  # ipaddress's ValueError names the entry that is no address or network
        return value

    @field_validator("webhook_retry_schedule")
    @classmethod
    def _check_webhook_schedule(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        if not value or any(float(v) < 0 for v in value):
            raise ValueError("must list at least one delay in seconds, none negative, e.g. 5,30,120")
        return tuple(float(v) for v in value)

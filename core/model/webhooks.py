"""Webhook notifications: the payload a tenant's receivers get, its stable id, and the URL rules (SSRF).

The id of a notification (the ``webhook-id`` header) is derived from what it is about, never drawn at
random: a sync retried after a crash between the provider call and its commit records the same id, and
receivers deduplicate on it. Payloads carry references and versions, never credentials or error texts.

Receivers must order by ``data.version`` per (tenant, entity): delivery order is not guaranteed across
retries (docs/PROTOCOL.md, "Webhooks").
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import ipaddress
from collections.abc import Iterable, Mapping
from typing import Any, Final
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field

from calsync.core.model.errors import InvalidWebhookUrl
from calsync.core.model.vocabulary import WebhookEventType

NOTIFICATION_PREFIX: Final = "msg_"
IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class WebhookData(BaseModel):
    """What happened, by reference: the ids and versions of the job payload, never a secret."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tenant_id: str
    entity_id: str | None = Field(default=None, description="the event; None for account notifications")
    account_id: str | None = Field(default=None, description="the target account; None for event.cancelled")
    version: int | None = Field(default=None, description="the event version; order by it per (tenant, entity)")
    external_id: str | None = Field(default=None, description="the provider's id of the event, once it has one")
    status: str = Field(description="synced | deleted | failed | cancelled | needs_reauth")
    reason: str | None = Field(default=None, description="sync.dead_lettered: the reason class of the DLQ record")
    error_class: str | None = Field(default=None, description="sync.dead_lettered: the error class, never its text")
    job_id: str | None = None
    trace_id: str | None = None


class WebhookNotification(BaseModel):
    """The body of every webhook request (the Standard Webhooks ``type`` / ``timestamp`` / ``data`` shape)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: WebhookEventType
    timestamp: dt.datetime = Field(description="when calsync recorded what happened (UTC)")
    data: WebhookData

    def body(self) -> bytes:
        """The exact bytes sent and signed."""
        return self.model_dump_json().encode()


def notification_id(event_type: WebhookEventType, *parts: object) -> str:
    """The stable ``webhook-id`` of one logical notification (the same on every retry that records it)."""
    digest = hashlib.sha256("\x1f".join([event_type, *(str(p) for p in parts)]).encode()).digest()
    return NOTIFICATION_PREFIX + base64.b32hexencode(digest[:20]).decode().lower()


_DATA_FIELDS: Final = tuple(WebhookData.model_fields)


def notification(
    event_type: WebhookEventType, data: Mapping[str, Any], *, key: Iterable[object]
) -> tuple[str, dict[str, Any]]:
    """A notification's id (from ``key``) and its payload as stored in the outbox.

    Built as a plain dict on the sync path (a model here cost a tenth of the outbox's price); every
    delivery validates it as a :class:`WebhookNotification` before signing (tests/model cover the shape).
    """
    unknown = data.keys() - set(_DATA_FIELDS)
    if unknown or "tenant_id" not in data or "status" not in data:
        raise ValueError(f"not webhook data fields: {sorted(unknown) or 'tenant_id and status are required'}")
    doc = {"type": event_type, "timestamp": dt.datetime.now(dt.UTC).isoformat(),
           "data": {name: data.get(name) for name in _DATA_FIELDS}}  # fmt: skip
    return notification_id(event_type, *key), doc


def parse_networks(values: Iterable[str]) -> tuple[Network, ...]:
    """Allow-listed networks (``CALSYNC_WEBHOOK_ALLOWED_NETWORKS``): addresses or CIDRs."""
    return tuple(ipaddress.ip_network(v.strip(), strict=False) for v in values if v.strip())


def refused_address(address: IpAddress, allowed: Iterable[Network] = ()) -> str | None:
    """Why a receiver at ``address`` is refused (loopback, private, link-local, metadata...), or None."""
    mapped = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else None
    checked = mapped or address
    if any(checked in network for network in allowed if network.version == checked.version):
        return None
    for name in ("unspecified", "loopback", "link_local", "private", "multicast", "reserved"):
        if getattr(checked, f"is_{name}"):
            return f"{checked} is a {name.replace('_', '-')} address"
    if not checked.is_global:
        return f"{checked} is not a public address"
    return None


def checked_url(url: str, *, allow_http: bool) -> tuple[str, str, int]:
    """The scheme, host and port of a receiver URL; raises InvalidWebhookUrl for anything else."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise InvalidWebhookUrl(f"not a URL: {exc}") from None
    allowed = ("https", "http") if allow_http else ("https",)
    if parts.scheme not in allowed:
        hint = " or http" if allow_http else " (http only with CALSYNC_WEBHOOK_ALLOW_HTTP, for development)"
        raise InvalidWebhookUrl(f"the URL must be https{hint}, not {parts.scheme or 'schemeless'}")
    if not parts.hostname:
        raise InvalidWebhookUrl("the URL has no host")
    if parts.username or parts.password:
        raise InvalidWebhookUrl("the URL must not carry credentials")
    if parts.fragment:
        raise InvalidWebhookUrl("the URL must not have a fragment")
    if len(url) > 2048:
        raise InvalidWebhookUrl("the URL is longer than 2048 characters")
    return parts.scheme, parts.hostname, port or (443 if parts.scheme == "https" else 80)

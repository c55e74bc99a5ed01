"""What a notification is, who may receive it, and how a request is signed: pure rules, no I/O.

**Stable ids.** A notification's id (the ``webhook-id`` header) is derived from what it is about, never
drawn at random: a sync retried after a crash between the provider call and its commit records the same
id, and receivers deduplicate on it.

**Receivers (SSRF).** https only (http with ``WEBHOOK_ALLOW_HTTP``), no credentials or fragment in the
URL, and no address that is not public (loopback, private, link-local, metadata...) unless allow-listed.

**Signatures** (Standard Webhooks, standardwebhooks.com): ``v1,<base64 HMAC-SHA256 of id.timestamp.body>``.
A secret is ``whsec_`` + base64 of random bytes; the HMAC key is the decoded bytes. During a secret
rotation both the new and the previous secret sign, and the header carries both signatures separated by
a space: a receiver holding either secret accepts the request.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import hmac
import ipaddress
import secrets
from collections.abc import Iterable, Mapping
from typing import Any, Final
from urllib.parse import urlsplit

from calsync.core.model.errors import InvalidWebhookUrl
from calsync.core.model.vocabulary import WebhookEventType
from calsync.core.model.webhooks import WebhookData
from calsync.core.webhooks.settings import Network

NOTIFICATION_PREFIX: Final = "msg_"
SECRET_PREFIX: Final = "whsec_"
IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_DATA_FIELDS: Final = tuple(WebhookData.model_fields)


def notification_id(event_type: WebhookEventType, *parts: object) -> str:
    """The stable ``webhook-id`` of one logical notification (the same on every retry that records it)."""
    digest = hashlib.sha256("\x1f".join([event_type, *(str(p) for p in parts)]).encode()).digest()
    return NOTIFICATION_PREFIX + base64.b32hexencode(digest[:20]).decode().lower()


def notification(
    event_type: WebhookEventType, data: Mapping[str, Any], *, key: Iterable[object]
) -> tuple[str, dict[str, Any]]:
    """A notification's id (from ``key``) and its payload as stored in the outbox.

    A plain dict, built on the sync path (docs/notes/webhooks.md, "Cost of the outbox"); every delivery
    validates it as a :class:`~core.model.webhooks.WebhookNotification` before signing.
    """
    unknown = data.keys() - set(_DATA_FIELDS)
    if unknown or "tenant_id" not in data or "status" not in data:
        raise ValueError(f"not webhook data fields: {sorted(unknown) or 'tenant_id and status are required'}")
    fields = {name: data.get(name) for name in _DATA_FIELDS}
    doc = {"type": event_type, "timestamp": dt.datetime.now(dt.UTC).isoformat(), "data": fields}
    return notification_id(event_type, *key), doc


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
    if parts.scheme not in (("https", "http") if allow_http else ("https",)):
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


def new_secret() -> str:
    """A fresh signing secret (shown once to the operator, stored encrypted)."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


def signature(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """One ``v1,`` signature of a request."""
    key = base64.b64decode(secret.removeprefix(SECRET_PREFIX))
    signed = f"{msg_id}.{timestamp}.".encode() + body
    return "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()


def request_headers(keys: Iterable[str], msg_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The three Standard Webhooks headers of one attempt (one signature per live secret), and the content type."""
    return {
        "content-type": "application/json",
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": " ".join(signature(secret, msg_id, timestamp, body) for secret in keys),
    }

"""Standard Webhooks signatures (standardwebhooks.com): ``v1,<base64 HMAC-SHA256 of id.timestamp.body>``.

A secret is ``whsec_`` + base64 of random bytes; the HMAC key is the decoded bytes. During a secret
rotation both the new and the previous secret sign, and the header carries both signatures separated by
a space: a receiver holding either secret accepts the request.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Iterable
from typing import Final

SECRET_PREFIX: Final = "whsec_"


def new_secret() -> str:
    """A fresh signing secret (shown once to the operator, stored encrypted)."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


def _key(secret: str) -> bytes:
    return base64.b64decode(secret.removeprefix(SECRET_PREFIX))


def signature(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """One ``v1,`` signature of a request."""
    signed = f"{msg_id}.{timestamp}.".encode() + body
    return "v1," + base64.b64encode(hmac.new(_key(secret), signed, hashlib.sha256).digest()).decode()


def signature_header(keys: Iterable[str], msg_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` header: one signature per live secret, space-separated."""
    return " ".join(signature(secret, msg_id, timestamp, body) for secret in keys)


def request_headers(keys: Iterable[str], msg_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The three Standard Webhooks headers of one attempt (plus the content type)."""
    return {
        "content-type": "application/json",
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature_header(keys, msg_id, timestamp, body),
    }

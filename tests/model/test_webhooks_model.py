"""The webhook model: stable ids, the stored payload's shape, Standard Webhooks signatures, refused addresses."""

from __future__ import annotations

import ipaddress
import time

import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from calsync.core.model.webhooks import WebhookNotification
from calsync.core.webhooks.model import (
    new_secret,
    notification,
    notification_id,
    refused_address,
    request_headers,
    signature,
)
from calsync.core.webhooks.settings import parse_networks


def test_ids_are_stable_per_logical_notification() -> None:
    first = notification_id("sync.succeeded", "t", "e", "a", 3)
    assert first == notification_id("sync.succeeded", "t", "e", "a", 3)
    assert first != notification_id("sync.succeeded", "t", "e", "a", 4)
    assert first != notification_id("sync.dead_lettered", "t", "e", "a", 3)
    assert first.startswith("msg_") and len(first) <= 64


def test_the_stored_payload_is_a_valid_notification() -> None:
    notification_id_, doc = notification("sync.succeeded", {"tenant_id": "t", "entity_id": "e", "version": 2,
                                                             "status": "synced"}, key=["t", "e", 2])  # fmt: skip
    parsed = WebhookNotification.model_validate(doc)
    assert parsed.data.version == 2 and parsed.data.account_id is None and parsed.type == "sync.succeeded"
    assert notification_id_ == notification_id("sync.succeeded", "t", "e", 2)
    with pytest.raises(ValueError, match="credentials"):
        notification("sync.succeeded", {"tenant_id": "t", "status": "x", "credentials": "no"}, key=[1])
    with pytest.raises(ValueError, match="required"):
        notification("sync.succeeded", {"tenant_id": "t"}, key=[1])


def test_signatures_verify_with_standardwebhooks_and_either_secret_during_a_rotation() -> None:
    old, new = new_secret(), new_secret()
    body, now = b'{"type":"sync.succeeded"}', int(time.time())
    headers = request_headers([new, old], "msg_abc", now, body)
    assert (
        headers["webhook-signature"] == f"{signature(new, 'msg_abc', now, body)} {signature(old, 'msg_abc', now, body)}"
    )
    for secret in (old, new):
        Webhook(secret).verify(body, headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(new_secret()).verify(body, headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(new).verify(body + b" ", headers)


@pytest.mark.parametrize(
    ("address", "refused"),
    [
        ("93.184.216.34", False),
        ("2606:2800:220:1:248:1893:25c8:1946", False),
        ("127.0.0.1", True),
        ("10.1.2.3", True),
        ("172.16.0.1", True),
        ("192.168.0.1", True),
        ("169.254.169.254", True),  # cloud metadata
        ("fd00:ec2::254", True),  # AWS metadata over IPv6
        ("::1", True),
        ("fe80::1", True),
        ("::ffff:10.0.0.1", True),
        ("0.0.0.0", True),
        ("224.0.0.1", True),
        ("100.100.100.200", True),  # Alibaba metadata, shared address space
    ],
)
def test_refused_addresses(address: str, refused: bool) -> None:
    assert (refused_address(ipaddress.ip_address(address)) is not None) is refused


def test_the_allow_list_names_exceptions() -> None:
    allowed = parse_networks(["127.0.0.0/8", " ", "fd00::/8"])
    assert refused_address(ipaddress.ip_address("127.0.0.5"), allowed) is None
    assert refused_address(ipaddress.ip_address("::ffff:127.0.0.1"), allowed) is None
    assert refused_address(ipaddress.ip_address("fd00:ec2::254"), allowed) is None
    assert refused_address(ipaddress.ip_address("10.0.0.1"), allowed) is not None

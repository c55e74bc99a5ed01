"""SSRF protection: https only (http with the development setting), no refused address at registration or
at delivery (DNS can change), unless allow-listed; the request goes to the address that was checked."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable

import pytest

from calsync.core.model.errors import InvalidWebhookUrl
from calsync.core.model.vocabulary import WebhookOutcome
from calsync.core.webhooks import store
from calsync.core.webhooks.deliverer import DeliveryPolicy
from calsync.core.webhooks.endpoints import Endpoints
from calsync.core.webhooks.model import IpAddress, notification
from calsync.core.webhooks.transport import Transport, system_resolver
from tests.webhooks.conftest import Hooks
from tests.webhooks.receiver import Receiver

PUBLIC = ipaddress.ip_address("93.184.216.34")


def _transport(*, allow_http: bool = True, allowed: tuple[str, ...] = (), resolver: Callable[..., list[IpAddress]]
               = system_resolver) -> Transport:  # fmt: skip
    return Transport(allow_http=allow_http, allowed_networks=allowed, connect_timeout=1, timeout=2, resolver=resolver)


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://127.0.0.1/hooks", "loopback"),
        ("http://169.254.169.254/latest/meta-data", "link-local"),
        ("http://10.0.0.1/", "private"),
        ("http://localhost:8080/hooks", "loopback"),  # a hostname resolving to loopback
        ("http://[::1]/", "loopback"),
        ("http://[::ffff:127.0.0.1]/", "loopback"),  # IPv4-mapped
        ("http://192.168.1.10/", "private"),
        ("http://0.0.0.0/", "unspecified"),
        ("http://100.64.0.1/", "not a public address"),  # carrier-grade NAT
    ],
)
def test_refused_addresses(url: str, why: str) -> None:
    with pytest.raises(InvalidWebhookUrl, match=why):
        _transport().check(url)


def test_allow_listed_networks_are_accepted() -> None:
    transport = _transport(allowed=("127.0.0.0/8", "10.0.0.0/8"))
    assert str(transport.check("http://127.0.0.1/hooks")) == "127.0.0.1"
    assert str(transport.check("http://10.0.0.1/")) == "10.0.0.1"
    with pytest.raises(InvalidWebhookUrl, match="link-local"):
        transport.check("http://169.254.169.254/")


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://hooks.example.com/", "must be https"),
        ("ftp://hooks.example.com/", "must be https"),
        ("https://user:pw@hooks.example.com/", "credentials"),
        ("https:///nohost", "no host"),
        ("https://hooks.example.com:99999/", "not a URL"),
    ],
)
def test_only_https_urls_without_the_development_setting(url: str, why: str) -> None:
    with pytest.raises(InvalidWebhookUrl, match=why):
        _transport(allow_http=False, resolver=lambda host, port: [PUBLIC]).check(url)


def test_one_refused_address_among_several_refuses_the_url() -> None:
    transport = _transport(resolver=lambda host, port: [PUBLIC, ipaddress.ip_address("10.1.2.3")])
    with pytest.raises(InvalidWebhookUrl, match=r"10\.1\.2\.3 is a private"):
        transport.check("https://hooks.example.com/")


def test_registration_refuses_before_storing(hooks: Hooks) -> None:
    endpoints = Endpoints(hooks.pipeline.clients.db, hooks.pipeline.clients.cipher, _transport(), grace_seconds=60)
    for url in ("http://127.0.0.1/x", "http://169.254.169.254/", "http://10.0.0.1/", "http://localhost/"):
        with pytest.raises(InvalidWebhookUrl):
            endpoints.add("tenant-1", url, ["sync.succeeded"])
    assert endpoints.list() == []


def test_the_request_goes_to_the_checked_address(receiver: Receiver) -> None:
    port = int(receiver.url.rsplit(":", 1)[1].split("/")[0])
    # The name does not resolve anywhere but in this resolver: reaching the receiver proves the checked
    # address was used, never a second lookup.
    transport = _transport(allowed=("127.0.0.0/8",), resolver=lambda host, port: [ipaddress.ip_address("127.0.0.1")])
    url = f"http://hooks.calsync.invalid:{port}/hooks"
    answer = transport.post(url, transport.check(url), {"content-type": "application/json"}, b"{}")
    assert answer.status == 200
    assert receiver.received[0].headers["host"] == f"hooks.calsync.invalid:{port}"


def test_delivery_checks_again_when_dns_changed(hooks: Hooks, receiver: Receiver) -> None:
    pipeline = hooks.pipeline
    db = pipeline.clients.db
    answers = {"now": [PUBLIC]}
    transport = _transport(resolver=lambda host, port: answers["now"])
    endpoints = Endpoints(db, pipeline.clients.cipher, transport, grace_seconds=60)
    _, endpoint = endpoints.add("tenant-1", "https://hooks.example.com/x", ["sync.succeeded"])
    notification_id, doc = notification("sync.succeeded", {"tenant_id": "tenant-1", "status": "synced"}, key=[1])
    with db.write() as conn:
        store.record_notification(conn, notification_id, "tenant-1", "sync.succeeded", doc)
    policy = DeliveryPolicy(schedule=(0.05,), jitter=0, max_retry_after=1, disable_after=60, disable_min_failures=5)
    deliverer = hooks.deliverer(policy, transport)
    assert deliverer.dispatch(notification_id) == [endpoint.id]
    answers["now"] = [ipaddress.ip_address("127.0.0.1")]  # rebound to loopback after the registration
    assert deliverer.deliver(notification_id, endpoint.id).outcome is WebhookOutcome.REFUSED
    (record,) = pipeline.dead_letters(kind="webhook")
    assert record.reason == "webhook address refused" and "127.0.0.1 is a loopback" in record.last_error
    assert receiver.received == []

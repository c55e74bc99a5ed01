"""The webhooks page: every tenant's endpoints (disabled ones and why, the breaker's streak) and the recent deliveries
(status, attempts, last answer), outstanding ones by default, filtered and in keyset pages."""

from __future__ import annotations

import datetime as dt
import html
import re

import pytest

from calsync.core.console.pages import webhooks as webhooks_page
from calsync.core.model.vocabulary import WebhookDeliveryStatus
from calsync.core.store.crypto import CredentialCipher, generate_key
from calsync.core.webhooks import store
from tests.console.conftest import ConsoleClient
from tests.console.paging import every_page
from tests.support import Pipeline

CIPHER = CredentialCipher(generate_key())  # the page never reads an endpoint's secret
_ENDPOINT = re.compile(r'<tr class="endpoint" data-endpoint="([^"]+)">(.*?)</tr>', re.S)
# A delivery's row: notification, endpoint, status, attempts, then the rest of its cells.
_DELIVERY = re.compile(
    r'<tr class="delivery">\s*<th scope="row"><code>([^<]+)</code></th>\s*<td><code>([^<]+)</code></td>'
    r'\s*<td class="status[^"]*">(\w+)</td>\s*<td class="num">(\d+)</td>(.*?)</tr>',
    re.S,
)


def _text(fragment: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", fragment)).split())


def _endpoint(pipeline: Pipeline, tenant: str, url: str) -> str:
    with pipeline.clients.db.write() as conn:
        _, endpoint = store.create_endpoint(conn, CIPHER, tenant_id=tenant, url=url, events=["sync.dead_lettered"])
    return endpoint.id


def _delivery(pipeline: Pipeline, notification: str, endpoint: str, *, answer: int | None, error: str | None) -> None:
    """A notification delivered to ``endpoint`` once: 2xx delivers it, else it stays pending with the error."""
    with pipeline.clients.db.write() as conn:
        store.record_notification(conn, notification, "tenant-1", "sync.dead_lettered", {"n": notification})
        store.create_deliveries(conn, notification, [endpoint])
        status: WebhookDeliveryStatus = "delivered" if answer is not None and answer < 300 else "pending"
        later = dt.datetime.now(dt.UTC) + dt.timedelta(minutes=5) if status == "pending" else None
        store.record_attempt(conn, notification, endpoint, status, answer, error, later)


def test_endpoints_show_their_status_who_disabled_them_and_why_and_the_breaker(
    console_client: ConsoleClient, pipeline: Pipeline
) -> None:
    healthy = _endpoint(pipeline, "tenant-1", "https://hooks.example.com/ok")
    failing = _endpoint(pipeline, "tenant-2", "https://hooks.example.com/failing")
    with pipeline.clients.db.write() as conn:
        for _ in range(3):
            store.record_failure(conn, failing, dt.datetime.now(dt.UTC))
        store.set_status(conn, failing, "disabled", by="auto", reason="20 failures in a row")
    page = console_client("viewer").get("/webhooks").text
    rows = {endpoint: _text(cells) for endpoint, cells in _ENDPOINT.findall(page)}
    assert list(rows) == [healthy, failing]
    assert "enabled" in rows[healthy] and "no failures" in rows[healthy] and "tenant-1" in rows[healthy]
    assert "disabled by auto: 20 failures in a row" in rows[failing] and "3 failed in a row" in rows[failing]
    only = console_client("viewer").get("/webhooks", params={"tenant_id": "tenant-2"}).text
    assert [endpoint for endpoint, _ in _ENDPOINT.findall(only)] == [failing]


def test_deliveries_outstanding_by_default_filtered_and_in_keyset_pages(
    console_client: ConsoleClient, pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    one, two = (
        _endpoint(pipeline, "tenant-1", "https://a.example.com/"),
        _endpoint(pipeline, "tenant-1", "https://b.example.com/"),
    )
    _delivery(pipeline, "msg_ok", one, answer=200, error=None)
    for i in range(4):
        _delivery(pipeline, f"msg_{i}", one if i % 2 else two, answer=503, error=f"HTTP 503 from receiver {i}")
    client = console_client("viewer")
    shown = _DELIVERY.findall(client.get("/webhooks").text)
    assert [d[0] for d in shown] == ["msg_3", "msg_2", "msg_1", "msg_0"]  # most recently changed first
    assert all(status == "pending" and attempts == "1" for _, _, status, attempts, _ in shown)
    assert "HTTP 503" in _text(shown[0][4]) and "receiver 3" in _text(shown[0][4])
    delivered = _DELIVERY.findall(client.get("/webhooks", params={"status": "delivered"}).text)
    assert [(d[0], d[2]) for d in delivered] == [("msg_ok", "delivered")]
    of_one = _DELIVERY.findall(client.get("/webhooks", params={"status": "any", "endpoint_id": one}).text)
    assert [d[0] for d in of_one] == ["msg_3", "msg_1", "msg_ok"]
    assert client.get("/webhooks", params={"status": "lost"}).status_code == 400
    assert client.get("/webhooks", params={"cursor": "forged"}).status_code == 400
    monkeypatch.setattr(webhooks_page, "PAGE_SIZE", 2)
    seen = every_page(client, "/webhooks", "status=any", lambda page: [d[0] for d in _DELIVERY.findall(page)])
    assert seen == ["msg_3", "msg_2", "msg_1", "msg_0", "msg_ok"]

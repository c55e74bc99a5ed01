"""The Exchange emulator answers FindItem by extended property from an index: exactly what a scan would."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from exchangelib import BASIC, IMPERSONATION, UTC, Account, CalendarItem, Configuration, Credentials, EWSDateTime
from exchangelib import Version as EwsVersion
from exchangelib.version import EXCHANGE_2016

import calsync.providers.exchange.items  # noqa: F401  (registers the calsync_sync_key property on CalendarItem)
from calsync.core.model.markers import GRAPH_SYNC_KEY_PROPERTY_ID
from calsync_emulators.control import EwsControl, GraphControl
from calsync_emulators.graph.tls import TlsIdentity

MAILBOX = "index@example.com"


@pytest.fixture
def calendar(graph: GraphControl) -> Iterator[Any]:
    """The mailbox's calendar through plain exchangelib."""
    login = Credentials("svc@example.com", "svc-password")
    config = Configuration(service_endpoint=graph.server_url, credentials=login, auth_type=BASIC,
                           version=EwsVersion(build=EXCHANGE_2016))  # fmt: skip
    account = Account(MAILBOX, config=config, autodiscover=False, access_type=IMPERSONATION, default_timezone=UTC)
    yield account.calendar
    account.protocol.close()


@pytest.fixture
def graph_http(graph: GraphControl, emulator_tls: TlsIdentity) -> Iterator[httpx.Client]:
    """An httpx client with an app token for the emulator's Graph front."""
    with httpx.Client(verify=ssl.create_default_context(cafile=str(emulator_tls.ca_file)), timeout=10) as client:
        form = {"grant_type": "client_credentials", "client_id": "calsync-client", "client_secret": "client-secret",
                "scope": "https://graph.microsoft.com/.default"}  # fmt: skip
        answer = client.post(f"{graph.https_url}/example-tenant/oauth2/v2.0/token", data=form).json()
        client.headers["Authorization"] = f"Bearer {answer['access_token']}"
        yield client


def _create(calendar: Any, subject: str, key: str) -> Any:
    start = EWSDateTime(2030, 1, 1, 9, tzinfo=UTC)
    item = CalendarItem(folder=calendar, subject=subject, start=start, end=start, calsync_sync_key=key)
    item.save()
    return item


def _found(calendar: Any, key: str) -> list[str]:
    """Subjects of the items FindItem returns for ``key``: by the index (IsEqualTo), checked against a scan (And)."""
    indexed = [i.subject for i in calendar.filter(calsync_sync_key=key).only("subject")]
    scanned = [i.subject for i in calendar.filter(calsync_sync_key=key, subject__exists=True).only("subject")]
    assert indexed == scanned
    return indexed


def test_finditem_by_sync_key_follows_every_change_of_ews_graph_and_outlook(
    calendar: Any, graph: GraphControl, graph_http: httpx.Client
) -> None:
    first = _create(calendar, "first", "k1")
    _create(calendar, "second", "k2")
    third = _create(calendar, "third", "k1")
    assert _found(calendar, "k1") == ["first", "third"]  # creation order, duplicates kept

    first.calsync_sync_key = "k3"
    first.save(update_fields=["calsync_sync_key"])  # UpdateItem
    assert (_found(calendar, "k1"), _found(calendar, "k3")) == (["third"], ["first"])

    events = f"{graph.api_endpoint}users/{MAILBOX}/calendar/events"
    body = {"subject": "graph", "start": {"dateTime": "2030-01-02T10:00:00", "timeZone": "UTC"},
            "end": {"dateTime": "2030-01-02T11:00:00", "timeZone": "UTC"},
            "singleValueExtendedProperties": [{"id": GRAPH_SYNC_KEY_PROPERTY_ID, "value": "k2"}]}  # fmt: skip
    created = graph_http.post(events, json=body)
    assert created.status_code == 201, created.text
    assert _found(calendar, "k2") == ["second", "graph"]
    moved = {"singleValueExtendedProperties": [{"id": GRAPH_SYNC_KEY_PROPERTY_ID, "value": "k4"}]}
    assert graph_http.patch(f"{events}/{created.json()['id']}", json=moved).status_code == 200
    assert (_found(calendar, "k2"), _found(calendar, "k4")) == (["second"], ["graph"])

    outlook = EwsControl(graph.base_url)  # the control routes by EWS ItemId
    outlook.edit_item(third.id, subject="edited in Outlook")
    assert _found(calendar, "k1") == ["edited in Outlook"]
    outlook.delete_item(third.id)
    first.delete()
    assert (_found(calendar, "k1"), _found(calendar, "k3")) == ([], [])
    graph.reset()
    assert (_found(calendar, "k2"), _found(calendar, "k4")) == ([], [])

"""The EWS emulator keeps the wire details exchangelib depends on, and its control API keeps its contract."""

from __future__ import annotations

from typing import Any

import exchangelib
import pytest
import requests
from exchangelib import (
    BASIC,
    IMPERSONATION,
    Account,
    CalendarItem,
    Configuration,
    Credentials,
    EWSDate,
    EWSDateTime,
    EWSTimeZone,
)

from calsync_emulators.control import EwsControl
from calsync_emulators.server import RunningEmulator
from tests.providers.exchange.ews_support import SOAP_PREFIX, basic

FIND_ITEM = (
    SOAP_PREFIX
    + """<m:FindItem Traversal="Shallow"><m:ItemShape><t:BaseShape>IdOnly</t:BaseShape></m:ItemShape>
<m:ParentFolderIds><t:DistinguishedFolderId Id="calendar"/></m:ParentFolderIds></m:FindItem></s:Body></s:Envelope>"""
)


def test_items_read_back_through_getitem_and_findtitem_paging(calendar: Any, ews: EwsControl) -> None:
    tz = EWSTimeZone("Europe/Paris")
    for n in range(5):
        CalendarItem(
            folder=calendar,
            account=calendar.account,
            subject=f"Item {n}",
            start=EWSDateTime(2030, 2, 1 + n, 9, tzinfo=tz),
            end=EWSDateTime(2030, 2, 1 + n, 10, tzinfo=tz),
        ).save()
    CalendarItem(
        folder=calendar,
        account=calendar.account,
        subject="Holiday",
        start=EWSDate(2030, 3, 1),
        end=EWSDate(2030, 3, 2),
        is_all_day=True,
    ).save()

    query = calendar.all().only("subject", "start")
    query.page_size = 2
    assert [i.subject for i in query] == [f"Item {n}" for n in range(5)] + ["Holiday"]
    assert len(ews.requests("FindItem")) == 3  # 2 + 2 + 2, following IndexedPagingOffset

    [holiday] = list(calendar.filter(subject="Holiday"))  # FindItem + full GetItem
    assert holiday.is_all_day is True
    assert (holiday.start, holiday.end) == (EWSDate(2030, 3, 1), EWSDate(2030, 3, 2))
    assert len(ews.requests("GetItem")) == 1


def test_version_and_auth_type_guessing_work_without_schema_faults(emulator: RunningEmulator, ews: EwsControl) -> None:
    exchangelib.close_connections()  # else the Protocol cached by earlier tests, version already known, is reused
    config = Configuration(
        service_endpoint=f"{emulator.url}/EWS/Exchange.asmx",
        credentials=Credentials("svc@example.com", "svc-password"),
    )
    account = Account("echo@example.com", config=config, autodiscover=False, access_type=IMPERSONATION)
    try:
        assert account.protocol.auth_type == BASIC
        assert account.version.api_version == "Exchange2016"
    finally:
        account.protocol.close()
    assert [(r["operation"], r["status"]) for r in ews.requests()] == [("ConvertId", 401), ("ConvertId", 200)]


def test_errors_are_keep_alive_with_content_length_and_xml_faults(emulator: RunningEmulator, ews: EwsControl) -> None:
    url = f"{emulator.url}/EWS/Exchange.asmx"
    with requests.Session() as session:
        refused = session.post(url, data=FIND_ITEM, headers=basic("svc@example.com", "nope"))
        assert refused.status_code == 401
        assert "Basic" in refused.headers["WWW-Authenticate"]
        assert "close" not in refused.headers.get("Connection", "").lower()
        assert refused.headers["Content-Length"] == "0"

        ews.add_fault(operation="FindItem", reason="ErrorServerBusy", level="fault", retry_after=1.5, times=1)
        busy = session.post(url, data=FIND_ITEM, headers=basic("svc@example.com", "svc-password"))
        assert busy.status_code == 500
        assert busy.content.startswith(b"<?xml")
        assert b"<e:ResponseCode" in busy.content and b'Name="BackOffMilliseconds">1500<' in busy.content
        assert "close" not in busy.headers.get("Connection", "").lower()

        found = session.post(url, data=FIND_ITEM, headers=basic("alice@example.com", "alice-password"))
        assert found.status_code == 200
        assert b'TotalItemsInView="0"' in found.content and b'IncludesLastItemInRange="true"' in found.content

    # The fault fired before authentication, as a front-end throttle would.
    assert [r.get("auth") for r in ews.requests()] == ["rejected", None, "basic"]
    assert ews.requests()[1]["fault"] == "ErrorServerBusy"
    assert ews.requests()[-1]["mailbox"] is None  # no X-AnchorMailbox: the login's own mailbox
    assert ews.requests()[-1]["access"] == "delegate"


def test_fault_rules_can_target_one_mailbox(calendar: Any, ews: EwsControl) -> None:
    ews.add_fault(operation="FindItem", mailbox="someone-else@example.com", reason="ErrorMailboxMoveInProgress")
    assert list(calendar.all().only("id")) == []
    ews.add_fault(operation="FindItem", mailbox="DELTA@example.com", reason="ErrorMailboxMoveInProgress")
    with pytest.raises(exchangelib.errors.ErrorMailboxMoveInProgress):
        list(calendar.all().only("id"))


def test_control_api_rejects_what_it_cannot_do(emulator: RunningEmulator) -> None:
    base = f"{emulator.url}/_emulator"
    assert requests.get(f"{base}/items/unknown-id", timeout=5).status_code == 404
    assert requests.delete(f"{base}/items/unknown-id", timeout=5).status_code == 404
    assert requests.post(f"{base}/barriers", json={"parties": 0, "operation": "X"}, timeout=5).status_code == 400
    assert requests.post(f"{base}/barriers", json={}, timeout=5).status_code == 400
    assert requests.put(f"{base}/directory", json={"users": {"x": {}}}, timeout=5).status_code == 400
    assert requests.post(f"{base}/faults", json={"level": "sideways"}, timeout=5).status_code == 400
    assert requests.get(f"{base}/nothing-here", timeout=5).status_code == 404
    assert requests.get(f"{emulator.url}/EWS/Exchange.asmx", timeout=5).status_code == 405

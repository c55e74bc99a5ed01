"""The EWS emulator's SyncFolderItems, through exchangelib's own sync_items and as raw SOAP for what it refuses."""

from __future__ import annotations

from typing import Any
from xml.sax.saxutils import escape

import pytest
import requests
from exchangelib import UTC, CalendarItem, EWSDateTime
from exchangelib.errors import ErrorInvalidSyncStateData
from exchangelib.folders import FolderCollection
from exchangelib.folders.collections import SyncCompleted
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from calsync_emulators.control import EwsControl
from calsync_emulators.server import RunningEmulator
from tests.providers.exchange.ews_support import SOAP_PREFIX, basic

SOAP = (
    SOAP_PREFIX
    + """<m:SyncFolderItems><m:ItemShape><t:BaseShape>IdOnly</t:BaseShape>{extra}</m:ItemShape>
<m:SyncFolderId><t:DistinguishedFolderId Id="calendar"/></m:SyncFolderId>{state}
<m:MaxChangesReturned>{limit}</m:MaxChangesReturned></m:SyncFolderItems></s:Body></s:Envelope>"""
)
HEADERS = basic("alice@example.com", "alice-password")


def _save(calendar: Any, subject: str) -> Any:
    item = CalendarItem(folder=calendar, account=calendar.account, subject=subject,
                        start=EWSDateTime(2030, 2, 1, 9, tzinfo=UTC),
                        end=EWSDateTime(2030, 2, 1, 10, tzinfo=UTC))  # fmt: skip
    item.save()
    return item


def _sync(calendar: Any, state: str | None, limit: int = 100) -> tuple[list[tuple[str, Any]], str]:
    changes: list[tuple[str, Any]] = []
    try:
        for change in FolderCollection(account=calendar.account, folders=[calendar]).sync_items(
            sync_state=state, only_fields=["subject"], max_changes_returned=limit
        ):
            changes.append(change)
    except SyncCompleted as done:
        return changes, done.sync_state
    raise AssertionError("sync_items ends with SyncCompleted")


def _post(emulator: RunningEmulator, *, state: str = "", limit: str = "10", extra: str = "") -> bytes:
    body = SOAP.format(extra=extra, state=f"<m:SyncState>{state}</m:SyncState>" if state else "", limit=limit)
    answer = requests.post(f"{emulator.url}/EWS/Exchange.asmx", data=body, headers=HEADERS, timeout=10)
    return answer.content


def test_a_first_sync_creates_everything_in_pages_then_reports_changes_once(calendar: Any, ews: EwsControl) -> None:
    items = [_save(calendar, f"Item {n}") for n in range(5)]
    changes, state = _sync(calendar, None, limit=2)
    assert [(kind, item.subject) for kind, item in changes] == [("create", f"Item {n}") for n in range(5)]
    assert [r["changes"] for r in ews.requests("SyncFolderItems")] == [2, 2, 1]

    ews.edit_item(items[0].id, subject="Edited")
    ews.edit_item(items[0].id, subject="Edited twice")
    gone = items[1].id
    items[1].delete()
    late = _save(calendar, "Late")
    changes, newer = _sync(calendar, state)
    assert [(kind, getattr(item, "subject", None), item.id) for kind, item in changes] == [
        ("update", "Edited twice", items[0].id), ("delete", None, gone), ("create", "Late", late.id)]  # fmt: skip
    assert _sync(calendar, newer) == ([], newer)  # unchanged: the same state back, one call
    assert ews.requests("SyncFolderItems")[-1]["changes"] == 0


def test_an_invalid_or_expired_state_is_refused_in_the_documented_shape(
    calendar: Any, ews: EwsControl, emulator: RunningEmulator
) -> None:
    _save(calendar, "Item")
    _, state = _sync(calendar, None)
    with pytest.raises(ErrorInvalidSyncStateData):
        _sync(calendar, "bm90IGEgc3RhdGU=")
    ews.expire_sync_states()
    with pytest.raises(ErrorInvalidSyncStateData):
        _sync(calendar, state)
    raw = _post(emulator, state="garbage!")
    assert b"<m:ResponseCode>ErrorInvalidSyncStateData</m:ResponseCode>" in raw
    assert b"<m:SyncState/><m:IncludesLastItemInRange>true</m:IncludesLastItemInRange>" in raw


def test_a_state_older_than_the_forgotten_tombstones_is_refused(calendar: Any, ews: EwsControl) -> None:
    ews.set_tombstone_limit(1)
    first, second = _save(calendar, "One"), _save(calendar, "Two")
    _, state = _sync(calendar, None)
    first.delete()
    _, after_one = _sync(calendar, state)
    second.delete()  # the first tombstone is forgotten: a state from before it cannot be answered
    with pytest.raises(ErrorInvalidSyncStateData):
        _sync(calendar, state)
    assert [kind for kind, _ in _sync(calendar, after_one)[0]] == ["delete"]


def test_what_exchange_refuses_is_refused(emulator: RunningEmulator) -> None:
    for limit in ("0", "513", "many"):
        assert b"ErrorSchemaValidation" in _post(emulator, limit=limit)
    body = '<t:AdditionalProperties><t:FieldURI FieldURI="item:Body"/></t:AdditionalProperties>'
    assert b"ErrorInvalidPropertyRequest" in _post(emulator, extra=body)
    assert b"NoError" in _post(emulator, limit="512")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(state=st.text(alphabet=st.characters(codec="ascii", exclude_categories=["Cc"]), min_size=1, max_size=80))
def test_any_state_text_is_answered_never_a_server_error(emulator: RunningEmulator, state: str) -> None:
    raw = _post(emulator, state=escape(state))
    assert b"ErrorInvalidSyncStateData" in raw or b"NoError" in raw or b"ErrorSchemaValidation" in raw


def test_exchangelibs_folder_sync_items_keeps_its_state_on_the_folder(calendar: Any, ews: EwsControl) -> None:
    first = _save(calendar, "First")
    assert [(kind, item.id) for kind, item in calendar.sync_items(only_fields=["subject"])] == [("create", first.id)]
    state = calendar.item_sync_state
    assert state
    second = _save(calendar, "Second")
    assert [(kind, item.id) for kind, item in calendar.sync_items(only_fields=["subject"])] == [("create", second.id)]
    assert calendar.item_sync_state != state
    assert list(calendar.sync_items(only_fields=["subject"])) == []
    assert [r["sync"] for r in ews.requests("SyncFolderItems")] == ["full", "incremental", "incremental"]

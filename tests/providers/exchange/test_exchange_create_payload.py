"""The hand-built CreateItem payload is exchangelib's own, byte for byte, for every shape the adapter sends."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

import pytest
from exchangelib import UTC, Attendee, Configuration, Credentials, FailFast, Mailbox, Version
from exchangelib import Account as EwsAccount
from exchangelib.folders import Calendar, Root
from exchangelib.util import xml_to_str
from exchangelib.version import EXCHANGE_2013, EXCHANGE_2016, EXCHANGE_2019, Build

from calsync.core.model.calendar import EventState
from calsync.providers.exchange import create_payload, item_fields
from calsync.providers.exchange.items import SEND_MODES
from tests.providers.exchange.ews_support import ExchangeRig


def _mailbox(build: Any = EXCHANGE_2016, folder_id: str | None = "AAMkCalendar==",
             change_key: str | None = "AQAAABYAAAB") -> tuple[Any, Any]:  # fmt: skip
    """An exchangelib mailbox that never connects, and its calendar: by id, or distinguished (folder_id=None)."""
    # One endpoint per build: exchangelib caches protocols (and their version) per endpoint and login.
    endpoint = f"http://127.0.0.1:9/{build}/EWS/Exchange.asmx"
    config = Configuration(service_endpoint=endpoint, credentials=Credentials("a", "b"),
                           auth_type="basic", version=Version(build=build), retry_policy=FailFast())  # fmt: skip
    account = EwsAccount("cfo@example.com", config=config, autodiscover=False, access_type="impersonation",
                         default_timezone=UTC)  # fmt: skip
    return account, Calendar(root=Root(account=account), id=folder_id, changekey=change_key)


_BASE = EventState(id="evt-1", tenant_id="t1", version=1, title="Standup", start=dt.datetime(2030, 1, 2, 10, 0),
                   end=dt.datetime(2030, 1, 2, 10, 30), time_zone="Europe/Copenhagen", all_day=False)  # fmt: skip
_SHAPES = {
    "bare": {},
    "everything": {"location": "Room 1", "description": "Daily sync", "attendees": ("a@example.com", "b@example.org")},
    "all day": {"all_day": True, "start": dt.date(2030, 3, 30), "end": dt.date(2030, 4, 1), "time_zone": "Asia/Tokyo"},
    "all day, one day": {"all_day": True, "start": dt.date(2030, 7, 1), "end": dt.date(2030, 7, 1)},
    "utc": {"time_zone": "UTC", "location": "Lab"},
    "aware, dst": {"start": dt.datetime(2030, 7, 1, 8, tzinfo=dt.UTC), "end": dt.datetime(2030, 7, 1, 9, tzinfo=dt.UTC),
                   "time_zone": "America/New_York"},
    "escapes": {"title": "<b>&amp; \"q\" 'a' \x01\x0b ünï 😀", "location": "A & B <c>",
                "description": "line 1\r\nline 2\t\x00\x1f]]>", "attendees": ("o'hara@example.com",)},
    "empty title": {"title": "", "attendees": ("a@example.com", "a@example.com")},
    "255 characters": {"title": "x" * 255},
}  # fmt: skip


# The configured build, then what servers report once they answered: 2016 CU23, 2019, Exchange Online.
_BUILDS = [EXCHANGE_2016, Build(15, 1, 2507, 6), EXCHANGE_2019, Build(15, 20, 8000, 0)]


@pytest.mark.parametrize("shape", list(_SHAPES))
@pytest.mark.parametrize("send_updates", list(SEND_MODES))
@pytest.mark.parametrize("build", _BUILDS, ids=str)
def test_the_hand_built_payload_is_exchangelibs(shape: str, send_updates: str, build: Build) -> None:
    account, folder = _mailbox(build)
    fields = item_fields(dataclasses.replace(_BASE, **_SHAPES[shape]))
    mode = SEND_MODES[send_updates]  # type: ignore[index]
    assert create_payload.handled(account, fields)
    ours = xml_to_str(create_payload.hand_built_payload(account, folder, fields, "t1:evt-1:acct-a", mode))
    theirs = xml_to_str(create_payload.exchangelib_payload(account, folder, fields, "t1:evt-1:acct-a", mode))
    assert ours == theirs


@pytest.mark.parametrize(
    "why",
    ["subject over 255 characters", "address over 255 characters", "another server version", "another exchangelib"],
)
def test_what_was_not_compared_takes_exchangelibs_path(why: str, monkeypatch: pytest.MonkeyPatch) -> None:
    account, _ = _mailbox(EXCHANGE_2013 if why == "another server version" else EXCHANGE_2016)
    fields = item_fields(_BASE)  # refuses such values itself (UnrepresentableEvent): the payload's own guard here
    if why == "subject over 255 characters":
        fields["subject"] = "x" * 256
    if why == "address over 255 characters":
        fields["required_attendees"] = [Attendee(mailbox=Mailbox(email_address="a" * 250 + "@example.com"))]
    if why == "another exchangelib":
        monkeypatch.setattr(create_payload, "exchangelib_version", "5.7.0")
    assert not create_payload.handled(account, fields)


@pytest.mark.parametrize(
    ("folder_id", "change_key"),
    [
        (None, None),
        ("AAMk+/=", None),
        ("A" * 512, "B" * 512),
        ("A" * 513, "CK"),
        ("AAMk", "C" * 513),
        ("AAMk\x01&<", '\x02"'),
    ],
)
def test_the_saved_item_folder_is_exchangelibs(folder_id: str, change_key: str | None) -> None:
    account, folder = _mailbox(folder_id=folder_id, change_key=change_key)
    if folder_id is None:  # as the adapter's lookup leaves it: <DistinguishedFolderId Id="calendar"> in the mailbox
        assert type(folder.to_id()).__name__ == "DistinguishedFolderId"
    fields = item_fields(_BASE)

    def outcome(build: Any) -> str:
        try:
            return str(xml_to_str(build(account, folder, fields, "t1:evt-1:acct-a", "SendToNone")))
        except ValueError as exc:  # an id over exchangelib's limit: refused alike
            return f"refused: {exc}"

    assert outcome(create_payload.hand_built_payload) == outcome(create_payload.exchangelib_payload)


def test_the_adapter_sends_its_creates_hand_built(monkeypatch: pytest.MonkeyPatch, rig: ExchangeRig) -> None:
    provider, ews = rig.provider, rig.ews
    built: list[object] = []
    build = create_payload._calendar_item
    monkeypatch.setattr(create_payload, "_calendar_item", lambda draft: built.append(draft) or build(draft))
    account = rig.make_account()
    for event in (
        rig.make_event(),
        rig.make_event(id="evt-2", all_day=True, start=dt.date(2030, 1, 2), end=dt.date(2030, 1, 3)),
    ):
        provider.upsert(account, event, rig.make_target(account, event, create_attempted=False))
    assert len(built) == 2  # the emulator's build (15.1.2507.6) and both shapes take the hand-built path
    assert [r["operation"] for r in ews.requests()].count("CreateItem") == 2

"""The create service's envelope, answer and API versions are exchangelib's own, and fall back where not compared."""

from __future__ import annotations

from typing import Any

import pytest
from exchangelib import UTC, Configuration, Credentials, EWSTimeZone, FailFast, OAuth2Credentials, Version
from exchangelib import Account as EwsAccount
from exchangelib.account import Identity
from exchangelib.fields import TextField
from exchangelib.services import CreateItem
from exchangelib.util import create_element
from exchangelib.version import EXCHANGE_2013, EXCHANGE_2016, EXCHANGE_2019, Build

from calsync.providers.exchange import create_payload
from calsync.providers.exchange.create_payload import Created, _CalendarItemCreate


class _TitledIdentity(Identity):  # type: ignore[misc]
    """An identity with a field the hand-built header does not know: exchangelib's wrap must build it."""

    title = TextField(field_uri="Title")


def _account(access_type: str = "impersonation", *, identity: Any = None, build: Any = EXCHANGE_2016,
             timezone: Any = UTC, address: str = "cfo@example.com") -> Any:  # fmt: skip
    """An exchangelib mailbox that never connects: Basic (with ``access_type``) or OAuth with ``identity``."""
    endpoint = f"http://127.0.0.1:9/{build}/{access_type}/{id(identity)}/EWS/Exchange.asmx"
    credentials: Any = Credentials("a", "b")
    if identity is not None:
        credentials = OAuth2Credentials(client_id="c", client_secret="s", tenant_id="t", identity=identity)
    auth_type = "OAuth 2.0" if identity is not None else "basic"
    config = Configuration(service_endpoint=endpoint, credentials=credentials, version=Version(build=build),
                           auth_type=auth_type, retry_policy=FailFast())  # fmt: skip
    return EwsAccount(address, config=config, autodiscover=False, access_type=access_type, default_timezone=timezone)


def _wrapped(service: Any, api_version: str | None) -> str:
    content = create_element("m:CreateItem", attrs={"MessageDisposition": "SaveOnly"})
    try:
        return str(service.wrap(content, api_version=api_version))
    except Exception as exc:  # refused alike
        return f"refused: {type(exc).__name__}: {exc}"


_ACCOUNTS = {
    "impersonation": lambda: _account(),
    "impersonation, escapes": lambda: _account(address="o'hara&\x01<x>@example.com"),
    "impersonation, Copenhagen": lambda: _account(timezone=EWSTimeZone("Europe/Copenhagen")),
    "delegate": lambda: _account("delegate"),
    "OAuth, app identity": lambda: _account("delegate", identity=Identity(primary_smtp_address="cfo@example.com")),
    "OAuth, every identity field": lambda: _account("delegate", identity=Identity(
        sid="S-1-5-21", upn="cfo@corp.example", smtp_address="c@example.com", primary_smtp_address="x@example.com")),
    "OAuth, impersonation": lambda: _account(identity=Identity(upn="svc@example.com")),
    # Not the plain Identity compared: exchangelib's own wrap.
    "an identity subclass": lambda: _account("delegate", identity=_TitledIdentity(upn="u@example.com", title="CFO")),
    "an identity of another type": lambda: _account("delegate", identity=Identity(upn=123)),
}  # fmt: skip


@pytest.mark.parametrize("api_version", [None, "Exchange2016", "Exchange2013_SP1"])
@pytest.mark.parametrize("case", list(_ACCOUNTS))
def test_the_envelope_is_exchangelibs(case: str, api_version: str | None) -> None:
    account = _ACCOUNTS[case]()
    ours = _wrapped(_CalendarItemCreate(account=account), api_version)
    assert ours == _wrapped(CreateItem(account=account), api_version)
    if case == "an identity subclass":
        assert "<t:Title>CFO</t:Title>" in ours
    if case == "an identity of another type":
        assert ours.startswith("refused: TypeError")


_ENVELOPE = """<?xml version="1.0" encoding="utf-8"?>
<s:Envelope xmlns:s="http://schemas.xmlsoap.org/soap/envelope/"
    xmlns:m="http://schemas.microsoft.com/exchange/services/2006/messages"
    xmlns:t="http://schemas.microsoft.com/exchange/services/2006/types">
  <s:Header><t:ServerVersionInfo MajorVersion="15" MinorVersion="1" MajorBuildNumber="2507" MinorBuildNumber="6"
    Version="V2017_07_11"/></s:Header>
  <s:Body><m:CreateItemResponse><m:ResponseMessages>{}</m:ResponseMessages></m:CreateItemResponse></s:Body>
</s:Envelope>"""
_SUCCESS = """<m:CreateItemResponseMessage ResponseClass="Success"><m:ResponseCode>NoError</m:ResponseCode>
  <m:Items>{}</m:Items></m:CreateItemResponseMessage>"""
_ANSWERS = {
    "an item": _SUCCESS.format('<t:CalendarItem><t:ItemId Id="AAMk+/=" ChangeKey="DwAAAB"/></t:CalendarItem>'),
    "an item with attachments": _SUCCESS.format(
        '<t:CalendarItem><t:ItemId Id="AAMk" ChangeKey="Dw"/><t:Attachments><t:FileAttachment><t:AttachmentId'
        ' Id="AT" RootItemId="AAMk" RootItemChangeKey="Dw"/></t:FileAttachment></t:Attachments></t:CalendarItem>'),
    "an empty change key": _SUCCESS.format('<t:CalendarItem><t:ItemId Id="AAMk" ChangeKey=""/></t:CalendarItem>'),
    "no change key": _SUCCESS.format('<t:CalendarItem><t:ItemId Id="AAMk"/></t:CalendarItem>'),
    "no item id": _SUCCESS.format("<t:CalendarItem><t:Subject>x</t:Subject></t:CalendarItem>"),
    "no item": _SUCCESS.format(""),
    "two items": _SUCCESS.format('<t:CalendarItem><t:ItemId Id="A1" ChangeKey="C1"/></t:CalendarItem>'
                                 '<t:CalendarItem><t:ItemId Id="A2" ChangeKey="C2"/></t:CalendarItem>'),
    "an error": """<m:CreateItemResponseMessage ResponseClass="Error">
        <m:MessageText>The end date occurs before the start date.</m:MessageText>
        <m:ResponseCode>ErrorCalendarEndDateIsEarlierThanStartDate</m:ResponseCode><m:DescriptiveLinkKey>0</m:DescriptiveLinkKey>
        <m:Items/></m:CreateItemResponseMessage>""",
}  # fmt: skip


def _answers(service: Any, message: str) -> list[Any]:
    def seen(result: Any) -> Any:
        if isinstance(result, Exception):
            return (type(result), str(result))
        if isinstance(result, bool):
            return result
        return Created(result.id, result.changekey)

    try:
        return [seen(r) for r in service.parse(_ENVELOPE.format(message).encode())]
    except Exception as exc:  # an error the service raises (the adapter's classification reads it)
        return [("raised", seen(exc))]


@pytest.mark.parametrize("answer", list(_ANSWERS))
def test_the_answer_reads_as_exchangelib_reads_it(answer: str) -> None:
    account = _account()
    ours = _answers(_CalendarItemCreate(account=account), _ANSWERS[answer])
    assert ours == _answers(CreateItem(account=account), _ANSWERS[answer])
    assert ours  # every answer gives a result (True when there is no item, as exchangelib says)


@pytest.mark.parametrize("build", [EXCHANGE_2013, EXCHANGE_2016, Build(15, 1, 2507, 6), EXCHANGE_2019,
                                   Build(15, 20, 8000, 0)], ids=str)  # fmt: skip
def test_the_api_versions_tried_are_exchangelibs(build: Build) -> None:
    account = _account(build=build)
    ours = _CalendarItemCreate(account=account)._api_versions_to_try()
    assert ours == CreateItem(account=account)._api_versions_to_try()


def test_the_api_versions_follow_the_hint() -> None:
    account = _account()
    service = _CalendarItemCreate(account=account)
    first = service._api_versions_to_try()
    account.version = Version(build=EXCHANGE_2013)  # what a server's answer does
    assert service._api_versions_to_try()[0] == "Exchange2013" != first[0]
    assert service._api_versions_to_try() == CreateItem(account=account)._api_versions_to_try()
    assert create_payload.VERIFIED_WITH  # the version gate covers the service as a whole

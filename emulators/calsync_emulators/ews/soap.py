"""EWS on the wire: namespaces, the SOAP operation of a request, response envelopes, messages and faults.

The templates are the minimal ones exchangelib 5.x was verified to accept, with the quirks it depends on
(docs/notes/emulators.md, "EWS"): an ``<?xml`` prefix on every XML 500, SOAP faults with ``<detail>``,
item-level errors as ``ResponseClass="Error"``, a ``ServerVersionInfo`` header exchangelib parses.
"""

from __future__ import annotations

import copy
import datetime as dt
import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping
from typing import Any
from xml.sax.saxutils import escape

from calsync_emulators.server import Response

SOAP_NS = "http://schemas.xmlsoap.org/soap/envelope/"
MESSAGES_NS = "http://schemas.microsoft.com/exchange/services/2006/messages"
TYPES_NS = "http://schemas.microsoft.com/exchange/services/2006/types"
ERRORS_NS = "http://schemas.microsoft.com/exchange/services/2006/errors"

S, M, T = f"{{{SOAP_NS}}}", f"{{{MESSAGES_NS}}}", f"{{{TYPES_NS}}}"
for _prefix, _uri in (("s", SOAP_NS), ("m", MESSAGES_NS), ("t", TYPES_NS)):
    ET.register_namespace(_prefix, _uri)

END_ITEMS = "</t:CalendarItem></m:Items>"
_OPERATION_RE = re.compile(rb"<(?:[\w.-]+:)?Body\b[^>]*>\s*<(?:[\w.-]+:)?(\w+)")
_RESPONSE_CODE_RE = re.compile(r"<m:ResponseCode>(\w+)</m:ResponseCode>")
# exchangelib writes xs:boolean as 0/1 but only parses true/false, as Exchange answers.
_BOOLEAN_FIELDS = {"IsAllDayEvent", "ReminderIsSet", "IsResponseRequested", "AllowNewTimeProposal", "IsOnlineMeeting"}
_SERVER_VERSION = (
    '<s:Header><h:ServerVersionInfo xmlns:h="http://schemas.microsoft.com/exchange/services/2006/types" '
    'MajorVersion="15" MinorVersion="1" MajorBuildNumber="2507" MinorBuildNumber="6" Version="V2017_07_11"/>'
    "</s:Header>"
)


class EwsError(Exception):
    """An EWS error code: a SOAP fault when ``fault`` else an item-level ResponseMessage."""

    def __init__(self, code: str, message: str, *, fault: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.fault = fault


def soap_operation(body: bytes) -> str | None:
    """The SOAP operation of a request body (first child of s:Body), cheap enough for every fault-rule check."""
    match = _OPERATION_RE.search(body)
    return match.group(1).decode() if match else None


def local(tag: str) -> str:
    """An element's tag without its namespace."""
    return tag.rsplit("}", 1)[-1]


_OFFSET_WITH_SECONDS = re.compile(r"[+-][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?$")


def parse_time(text: str) -> dt.datetime:
    """An xs:dateTime as an aware datetime (UTC when it carries no offset).

    xs:dateTime's time zone is ``Z`` or ``±hh:mm``: an offset with seconds (a local mean time such as
    ``-07:52:58``, which Python writes) is a ValueError, as it fails Exchange's schema validation.
    """
    if _OFFSET_WITH_SECONDS.search(text.strip()):
        raise ValueError(f"{text!r}: an xs:dateTime offset has no seconds")
    value = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)


def prop_key(uri: ET.Element) -> str:
    """The identity of an ExtendedFieldURI: property set, name or id or tag, and type."""
    a = uri.attrib
    set_id = a.get("PropertySetId", "").lower() or a.get("DistinguishedPropertySetId", "")
    name = a.get("PropertyName") or a.get("PropertyId") or a.get("PropertyTag", "")
    return f"{set_id}/{name}/{a.get('PropertyType', '')}"


def stored(elem: ET.Element) -> ET.Element:
    """A private copy of a field as the client sent it, booleans in the canonical form Exchange returns."""
    copied = copy.deepcopy(elem)
    if local(copied.tag) in _BOOLEAN_FIELDS and copied.text in ("0", "1"):
        copied.text = "true" if copied.text == "1" else "false"
    return copied


def xml(elem: ET.Element) -> str:
    """An element serialised as text."""
    return ET.tostring(elem, encoding="unicode")


def _envelope(body: str) -> bytes:
    return (
        '<?xml version="1.0" encoding="utf-8"?>'
        f'<s:Envelope xmlns:s="{SOAP_NS}">{_SERVER_VERSION}<s:Body>{body}</s:Body></s:Envelope>'
    ).encode()


def soap_response(op: str, messages: Iterable[str]) -> bytes:
    """The response envelope of an operation, one ResponseMessage per input item."""
    return _envelope(
        f'<m:{op}Response xmlns:m="{MESSAGES_NS}" xmlns:t="{TYPES_NS}"><m:ResponseMessages>'
        + "".join(messages)
        + f"</m:ResponseMessages></m:{op}Response>"
    )


def success(op: str, content: str = "") -> str:
    """A ``NoError`` ResponseMessage."""
    return (
        f'<m:{op}ResponseMessage ResponseClass="Success"><m:ResponseCode>NoError</m:ResponseCode>'
        f"{content}</m:{op}ResponseMessage>"
    )


# What a SyncFolderItems error message carries besides the code (documented): exchangelib reads both first.
SYNC_ERROR_TAIL = "<m:SyncState/><m:IncludesLastItemInRange>true</m:IncludesLastItemInRange>"


def error(op: str, code: str, text: str) -> str:
    """An item-level error ResponseMessage (HTTP 200: in a bulk request only that item fails)."""
    tail = SYNC_ERROR_TAIL if op == "SyncFolderItems" else ""
    return (
        f'<m:{op}ResponseMessage ResponseClass="Error"><m:MessageText>{escape(text)}</m:MessageText>'
        f"<m:ResponseCode>{escape(code)}</m:ResponseCode><m:DescriptiveLinkKey>0</m:DescriptiveLinkKey>"
        f"{tail}</m:{op}ResponseMessage>"
    )


def response_code(message: str) -> str:
    """The ResponseCode of a ResponseMessage."""
    match = _RESPONSE_CODE_RE.search(message)
    return match.group(1) if match else "NoError"


def fault(code: str, text: str, back_off_ms: int | None = None) -> bytes:
    """A request-level SOAP fault, with the ``BackOffMilliseconds`` hint Exchange sends when throttling."""
    back_off = (
        f'<t:MessageXml xmlns:t="{TYPES_NS}"><t:Value Name="BackOffMilliseconds">{back_off_ms}</t:Value></t:MessageXml>'
        if back_off_ms is not None
        else ""
    )
    return (
        '<?xml version="1.0" encoding="utf-8"?>'
        f'<s:Envelope xmlns:s="{SOAP_NS}"><s:Body><s:Fault>'
        f'<faultcode xmlns:a="{TYPES_NS}">a:{escape(code)}</faultcode>'
        f'<faultstring xml:lang="en-US">{escape(text)}</faultstring>'
        f'<detail><e:ResponseCode xmlns:e="{ERRORS_NS}">{escape(code)}</e:ResponseCode>'
        f'<e:Message xmlns:e="{ERRORS_NS}">{escape(text)}</e:Message>{back_off}</detail>'
        "</s:Fault></s:Body></s:Envelope>"
    ).encode()


def xml_response(status: int, body: bytes, log: dict[str, Any]) -> Response:
    """An XML answer."""
    return Response(status, body, {"Content-Type": "text/xml; charset=utf-8"}, log)


def html_response(status: int, headers: Mapping[str, str] | None = None, log: dict[str, Any] | None = None) -> Response:
    """A bare HTML error page, as IIS or a proxy in front of Exchange answers."""
    body = f"<html><body><h1>HTTP Error {status}</h1></body></html>".encode()
    return Response(status, body, {"Content-Type": "text/html", **(headers or {})}, log or {})


def unauthorized(log: dict[str, Any]) -> Response:
    """401 with ``WWW-Authenticate`` (and never ``Connection: close``)."""
    return Response(401, b"", {"WWW-Authenticate": 'Basic realm="ews-emulator", Bearer'}, {**log, "auth": "rejected"})

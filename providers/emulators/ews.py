"""An Exchange Web Services emulator: the SOAP subset exchangelib 5.x sends for calendar sync.

exchangelib configured with ``Version(build=EXCHANGE_2016)``, a fixed ``auth_type`` and
``autodiscover=False`` sends only GetFolder (root, calendar), CreateItem, FindItem, GetItem, UpdateItem
and DeleteItem (plus ConvertId when it has to guess the version); that is what this server speaks, at
``POST /EWS/Exchange.asmx``. It keeps the quirks exchangelib depends on (see
``/work/shared/notes/exchange-ews-graph-facts.md`` §1.5-1.6): keep-alive HTTP/1.1 with Content-Length,
SOAP faults with ``<detail>`` as HTTP 500 XML, item-level errors as ``ResponseClass="Error"``,
``TotalItemsInView``/``IncludesLastItemInRange`` on FindItem, the same ItemId back from UpdateItem, a
new ChangeKey on every change, and never a schema-version fault unless a fault rule asks for one.

Semantics
---------
- Items live per mailbox with ItemId + ChangeKey and the fields the client sent (stored as sent,
  returned by FindItem/GetItem when asked for), extended properties included.
- UpdateItem with a stale ChangeKey → ``ErrorIrresolvableConflict`` (no merging, even for
  ``AutoResolve``); unknown ItemId → ``ErrorItemNotFound``; undecodable ItemId →
  ``ErrorInvalidIdMalformed``; End before Start → ``ErrorCalendarEndDateIsEarlierThanStartDate``.
  DeleteItem ignores the ChangeKey, like Exchange.
- Auth: HTTP Basic against the directory's users, or OAuth2 bearer tokens from the client-credentials
  token endpoint ``POST /{tenant}/oauth2/v2.0/token`` (the Azure AD path, so ``token_url`` only swaps
  the host). Missing or wrong credentials → 401 with ``WWW-Authenticate`` (never ``Connection: close``).
  NTLM is not emulated: it binds auth to the TCP connection, which the shared server does not expose.
  :data:`DEFAULT_DIRECTORY` knows ``svc@example.com`` / ``svc-password`` (may impersonate and
  delegate-access every mailbox), ``alice@example.com`` / ``alice-password`` (her own mailbox only) and
  the app ``calsync-client`` / ``client-secret`` of tenant ``example-tenant``. oauthlib refuses plain
  HTTP unless ``OAUTHLIB_INSECURE_TRANSPORT=1`` is set in the client's environment.
- Access: with an ``ExchangeImpersonation`` header the caller acts as that mailbox and must hold the
  impersonation right (apps always do) or gets the SOAP fault ``ErrorImpersonateUserDenied``; an
  unknown impersonated mailbox gives the fault ``ErrorNonExistentMailbox``; an app token without the
  header gives the fault ``ErrorInvalidExchangeImpersonationHeaderData``. Without the header (delegate
  access) a user reaches its own mailbox and those in its ``delegate_for`` list (``"*"`` = all), else
  the item-level ``ErrorAccessDenied``.
- Meeting modes (``SendMeetingInvitations``, ``SendMeetingInvitationsOrCancellations``,
  ``SendMeetingCancellations``) are recorded in the request log with the attendees they would notify.

Control API (besides the shared routes of :mod:`providers.emulators.server`)
---------------------------------------------------------------------------
- ``GET /_emulator/items[?mailbox=ADDR]``: items as JSON objects ``{"id", "change_key", "mailbox",
  "subject", "body", "location", "start", "end", "start_time_zone", "end_time_zone", "is_all_day",
  "required_attendees", "optional_attendees", "uid", "extended_properties": {name: value}}``
  (start/end exactly as the client sent them), in creation order.
- ``GET /_emulator/items/{id}``: one item (404 when unknown).
- ``PATCH /_emulator/items/{id}`` with ``{"subject"?, "location"?}``: a user edits the item in
  Outlook; its ChangeKey changes.
- ``DELETE /_emulator/items/{id}``: a user deletes the item in Outlook (404 when unknown).
- ``GET /_emulator/directory`` / ``PUT /_emulator/directory``: who may log in and what they may reach,
  ``{"users": {name: {"password", "impersonation": bool, "delegate_for": [addr | "*"]}},
  "clients": {client_id: {"secret", "tenant"}}, "mailboxes": [addr] | null}`` (null: every address
  exists). :data:`DEFAULT_DIRECTORY` applies until replaced; reset restores the directory the app was
  created with.
- ``POST /_emulator/tokens/revoke``: every issued bearer token stops working (the next EWS call gets 401).
- ``POST /_emulator/barriers`` with ``{"operation", "parties", "timeout_ms"}``: the next ``parties``
  requests for that SOAP operation wait for each other (up to ``timeout_ms``) before being served;
  their log entries say ``"barrier": "met"`` or ``"broken"``. It proves concurrency without timing.

Request log fields (``GET /_emulator/requests``)
-----------------------------------------------
SOAP calls add ``operation``, ``mailbox``, ``principal``, ``auth`` (``basic``/``bearer``/``rejected``),
``access`` (``delegate``/``impersonation``), ``response_codes`` (one per item), and per operation
``send_meeting_invitations`` (CreateItem), ``send_meeting_invitations_or_cancellations`` and
``conflict_resolution`` (UpdateItem), ``send_meeting_cancellations`` (DeleteItem), ``notified`` (the
attendees a sending mode reaches). Token calls add ``operation: "token"``, ``client_id``, ``outcome``.
A request broken by a fault rule is logged with ``operation``, ``mailbox`` and ``fault`` (rules fire
before authentication, like a front-end throttle) plus, with ``after``, what the applied request logged.

Fault rules (``POST /_emulator/faults``)
---------------------------------------
:class:`EwsFaultRule` adds to the shared rule: ``operation`` (SOAP operation, e.g. ``CreateItem``),
``mailbox`` (matched against ``X-AnchorMailbox``) and ``level``. With ``reason`` set (an EWS
ResponseCode), ``level: "item"`` (default) answers HTTP 200 with that code in every response message,
``level: "fault"`` answers a SOAP fault (HTTP ``status`` or 500) whose ``BackOffMilliseconds`` comes
from ``retry_after``. With only ``status``: a bare HTML error page (``Retry-After`` from
``retry_after``, ``Location`` on 3xx). On the token endpoint, ``reason`` is an OAuth error code
answered as JSON (status 400 unless given). ``delay_ms``, ``drop``, ``after``, ``times`` and
``probability`` work as for every emulator, e.g. ``{"operation": "CreateItem", "after": true,
"drop": true, "times": 1}`` loses the response of a create that happened.

:class:`EwsControl` is a typed client of all of this for tests and the demo.
"""

from __future__ import annotations

import base64
import binascii
import copy
import datetime as dt
import json
import re
import secrets
import threading
import time
import urllib.request
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import parse_qs, quote, unquote, urlencode
from xml.sax.saxutils import escape

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from calsync.providers.emulators.faults import FaultRule
from calsync.providers.emulators.server import EmulatorApp, Request, Response

SOAP_NS = "http://schemas.xmlsoap.org/soap/envelope/"
MESSAGES_NS = "http://schemas.microsoft.com/exchange/services/2006/messages"
TYPES_NS = "http://schemas.microsoft.com/exchange/services/2006/types"
ERRORS_NS = "http://schemas.microsoft.com/exchange/services/2006/errors"
EWS_PATH = "/ews/exchange.asmx"

_S, _M, _T = f"{{{SOAP_NS}}}", f"{{{MESSAGES_NS}}}", f"{{{TYPES_NS}}}"
for _prefix, _uri in (("s", SOAP_NS), ("m", MESSAGES_NS), ("t", TYPES_NS)):
    ET.register_namespace(_prefix, _uri)

_OPERATION_RE = re.compile(rb"<(?:[\w.-]+:)?Body\b[^>]*>\s*<(?:[\w.-]+:)?(\w+)")
_TOKEN_PATH_RE = re.compile(r"^/(?P<tenant>[^/]+)/oauth2/v2\.0/token$")
_ITEM_ID_PREFIX = b"calsync-ews-emulator:"
_SENDING_MODES = {"SendOnlyToAll", "SendToAllAndSaveCopy", "SendOnlyToChanged", "SendToChangedAndSaveCopy"}
# exchangelib writes xs:boolean as 0/1 but only parses true/false, as Exchange answers.
_BOOLEAN_FIELDS = {"IsAllDayEvent", "ReminderIsSet", "IsResponseRequested", "AllowNewTimeProposal", "IsOnlineMeeting"}
_END_ITEMS = "</t:CalendarItem></m:Items>"
_SERVER_VERSION = (
    '<s:Header><h:ServerVersionInfo xmlns:h="http://schemas.microsoft.com/exchange/services/2006/types" '
    'MajorVersion="15" MinorVersion="1" MajorBuildNumber="2507" MinorBuildNumber="6" Version="V2017_07_11"/>'
    "</s:Header>"
)


def soap_operation(body: bytes) -> str | None:
    """The SOAP operation of a request body (first child of s:Body), cheap enough for every fault-rule check."""
    match = _OPERATION_RE.search(body)
    return match.group(1).decode() if match else None


class EwsFaultRule(FaultRule):
    """A fault rule that can target one SOAP operation or mailbox and answer in EWS's own error shapes."""

    operation: str | None = Field(default=None, description="SOAP operation to match, e.g. CreateItem")
    mailbox: str | None = Field(default=None, description="X-AnchorMailbox to match (case-insensitive)")
    level: Literal["item", "fault"] = Field(default="item", description="reason as ResponseMessage or SOAP fault")

    def matches(self, method: str, path: str, request: Any = None) -> bool:
        """Shared matchers plus the SOAP operation and the anchor mailbox."""
        if not super().matches(method, path, request):
            return False
        if not isinstance(request, Request):
            return self.operation is None and self.mailbox is None
        if self.operation is not None and soap_operation(request.body) != self.operation:
            return False
        anchor = (request.header("X-AnchorMailbox") or "").lower()
        return self.mailbox is None or anchor == self.mailbox.lower()

    @property
    def breaks_response(self) -> bool:
        """An EWS ResponseCode alone (HTTP 200 with an error inside) also changes the answer."""
        return super().breaks_response or self.reason is not None


class UserSpec(BaseModel):
    """A Basic-auth login and what it may reach."""

    model_config = ConfigDict(extra="forbid")

    password: str
    impersonation: bool = False
    delegate_for: list[str] = Field(default_factory=list)


class ClientSpec(BaseModel):
    """An app registration for the client-credentials grant (full_access_as_app: impersonates anyone)."""

    model_config = ConfigDict(extra="forbid")

    secret: str
    tenant: str | None = None


class Directory(BaseModel):
    """Who may log in, and which mailboxes exist (None: every address)."""

    model_config = ConfigDict(extra="forbid")

    users: dict[str, UserSpec] = Field(default_factory=dict)
    clients: dict[str, ClientSpec] = Field(default_factory=dict)
    mailboxes: list[str] | None = None

    def user(self, name: str) -> UserSpec | None:
        """Usernames compare case-insensitively, as in Active Directory."""
        wanted = name.lower()
        return next((spec for key, spec in self.users.items() if key.lower() == wanted), None)

    def mailbox_exists(self, address: str) -> bool:
        """Whether the address has a mailbox."""
        return self.mailboxes is None or address.lower() in {m.lower() for m in self.mailboxes}


DEFAULT_DIRECTORY = Directory(
    users={
        "svc@example.com": UserSpec(password="svc-password", impersonation=True, delegate_for=["*"]),
        "alice@example.com": UserSpec(password="alice-password"),
    },
    clients={"calsync-client": ClientSpec(secret="client-secret", tenant="example-tenant")},
)


class _EwsError(Exception):
    """An EWS error code: a SOAP fault when ``fault`` else an item-level ResponseMessage."""

    def __init__(self, code: str, message: str, *, fault: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.fault = fault


@dataclass
class _Item:
    id: str
    mailbox: str
    change_key: str
    fields: dict[str, ET.Element] = field(default_factory=dict)
    extended: dict[str, ET.Element] = field(default_factory=dict)

    def text(self, name: str) -> str | None:
        elem = self.fields.get(name)
        return None if elem is None else (elem.text or "")

    def attendees(self, name: str) -> list[str]:
        elem = self.fields.get(name)
        if elem is None:
            return []
        return [e.text or "" for e in elem.iter(f"{_T}EmailAddress")]

    def to_json(self) -> dict[str, Any]:
        def tz(name: str) -> str | None:
            elem = self.fields.get(name)
            return None if elem is None else elem.get("Id")

        extended = {}
        for prop in self.extended.values():
            uri = prop.find(f"{_T}ExtendedFieldURI")
            name = "" if uri is None else uri.get("PropertyName") or uri.get("PropertyId") or uri.get("PropertyTag")
            extended[name or ""] = prop.findtext(f"{_T}Value")
        return {
            "id": self.id,
            "change_key": self.change_key,
            "mailbox": self.mailbox,
            "subject": self.text("Subject"),
            "body": self.text("Body"),
            "location": self.text("Location"),
            "start": self.text("Start"),
            "end": self.text("End"),
            "start_time_zone": tz("StartTimeZone"),
            "end_time_zone": tz("EndTimeZone"),
            "is_all_day": self.text("IsAllDayEvent") in ("1", "true"),
            "required_attendees": self.attendees("RequiredAttendees"),
            "optional_attendees": self.attendees("OptionalAttendees"),
            "uid": self.text("UID"),
            "extended_properties": extended,
        }


@dataclass
class _Caller:
    principal: str
    auth: Literal["basic", "bearer"]
    user: UserSpec | None
    impersonating: str | None
    log: dict[str, Any] = field(default_factory=dict)

    @property
    def default_mailbox(self) -> str | None:
        if self.impersonating:
            return self.impersonating
        return self.principal.lower() if "@" in self.principal else None


@dataclass
class _Barrier:
    operation: str
    barrier: threading.Barrier
    timeout: float
    slots: int


_Identity = tuple[str, Literal["basic", "bearer"], UserSpec | None]


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def _parse_time(text: str) -> dt.datetime:
    value = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)


def _prop_key(uri: ET.Element) -> str:
    a = uri.attrib
    set_id = a.get("PropertySetId", "").lower() or a.get("DistinguishedPropertySetId", "")
    name = a.get("PropertyName") or a.get("PropertyId") or a.get("PropertyTag", "")
    return f"{set_id}/{name}/{a.get('PropertyType', '')}"


def _stored(elem: ET.Element) -> ET.Element:
    """A private copy of a field as the client sent it, booleans in the canonical form Exchange returns."""
    copied = copy.deepcopy(elem)
    if _local(copied.tag) in _BOOLEAN_FIELDS and copied.text in ("0", "1"):
        copied.text = "true" if copied.text == "1" else "false"
    return copied


def _xml(elem: ET.Element) -> str:
    return ET.tostring(elem, encoding="unicode")


def _envelope(body: str) -> bytes:
    return (
        '<?xml version="1.0" encoding="utf-8"?>'
        f'<s:Envelope xmlns:s="{SOAP_NS}">{_SERVER_VERSION}<s:Body>{body}</s:Body></s:Envelope>'
    ).encode()


def _soap_response(op: str, messages: Iterable[str]) -> bytes:
    return _envelope(
        f'<m:{op}Response xmlns:m="{MESSAGES_NS}" xmlns:t="{TYPES_NS}"><m:ResponseMessages>'
        + "".join(messages)
        + f"</m:ResponseMessages></m:{op}Response>"
    )


def _success(op: str, content: str = "") -> str:
    return (
        f'<m:{op}ResponseMessage ResponseClass="Success"><m:ResponseCode>NoError</m:ResponseCode>'
        f"{content}</m:{op}ResponseMessage>"
    )


def _error(op: str, code: str, text: str) -> str:
    return (
        f'<m:{op}ResponseMessage ResponseClass="Error"><m:MessageText>{escape(text)}</m:MessageText>'
        f"<m:ResponseCode>{escape(code)}</m:ResponseCode><m:DescriptiveLinkKey>0</m:DescriptiveLinkKey>"
        f"</m:{op}ResponseMessage>"
    )


def _fault(code: str, text: str, back_off_ms: int | None = None) -> bytes:
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


def _xml_response(status: int, body: bytes, log: dict[str, Any]) -> Response:
    return Response(status, body, {"Content-Type": "text/xml; charset=utf-8"}, log)


def _html_response(
    status: int, headers: Mapping[str, str] | None = None, log: dict[str, Any] | None = None
) -> Response:
    body = f"<html><body><h1>HTTP Error {status}</h1></body></html>".encode()
    return Response(status, body, {"Content-Type": "text/html", **(headers or {})}, log or {})


def _unauthorized(log: dict[str, Any]) -> Response:
    return Response(401, b"", {"WWW-Authenticate": 'Basic realm="ews-emulator", Bearer'}, {**log, "auth": "rejected"})


class EwsEmulator(EmulatorApp):
    """The EWS calendar subset plus an OAuth2 client-credentials token endpoint."""

    rule_type = EwsFaultRule

    def __init__(self, directory: Directory | None = None) -> None:
        super().__init__()
        self._initial_directory = (directory or DEFAULT_DIRECTORY).model_copy(deep=True)
        self._lock = threading.RLock()
        self._ops: dict[str, Callable[[ET.Element, _Caller], list[str]]] = {
            "GetFolder": self._get_folder,
            "CreateItem": self._create_item,
            "FindItem": self._find_item,
            "GetItem": self._get_item,
            "UpdateItem": self._update_item,
            "DeleteItem": self._delete_item,
            "ConvertId": self._convert_id,
        }
        self.reset()

    # --- EmulatorApp ------------------------------------------------------------------------

    def reset(self) -> None:
        """Forget items, tokens and barriers; restore the directory the app was created with."""
        with self._lock:
            self.directory = self._initial_directory.model_copy(deep=True)
            self._items: dict[str, _Item] = {}
            self._tokens: dict[str, tuple[str, float]] = {}
            self._barriers: list[_Barrier] = []
            self._changes = 0

    def handle(self, request: Request) -> Response:
        """Route to the SOAP endpoint or the token endpoint."""
        token_path = _TOKEN_PATH_RE.match(request.path)
        if token_path:
            return self._token(request, token_path.group("tenant"))
        if request.path.lower() != EWS_PATH:
            return _html_response(404)
        if request.method != "POST":
            return _html_response(405, {"Allow": "POST"})
        return self._soap(request)

    def render_fault(self, rule: FaultRule, request: Request) -> Response:
        """Break a response the way Exchange (or Azure AD, on the token path) would."""
        message = rule.message or "Fault injected by the EWS emulator."
        if _TOKEN_PATH_RE.match(request.path):
            payload = {"error": rule.reason or "temporarily_unavailable", "error_description": message}
            answer = Response.json(rule.status or 400, payload)
            answer.log = {"operation": "token"}
            return answer
        op = soap_operation(request.body)
        log = {"operation": op, "mailbox": (request.header("X-AnchorMailbox") or "").lower() or None}
        level = rule.level if isinstance(rule, EwsFaultRule) else "item"
        if rule.reason and level == "fault":
            back_off = None if rule.retry_after is None else int(rule.retry_after * 1000)
            return _xml_response(rule.status or 500, _fault(rule.reason, message, back_off), log)
        if rule.reason and op:
            count = self._item_count(op, request.body)
            return _xml_response(200, _soap_response(op, [_error(op, rule.reason, message)] * count), log)
        status = rule.status or 500
        headers: dict[str, str] = {}
        if rule.retry_after is not None:
            headers["Retry-After"] = f"{rule.retry_after:g}"
        if 300 <= status < 400:
            headers["Location"] = "https://mail.example.net/EWS/Exchange.asmx"
        if status == 401:
            return _unauthorized(log)
        return _html_response(status, headers, log)

    def control(self, request: Request) -> Response | None:
        """Items, directory, token revocation and barriers (contract in the module docstring)."""
        parts = request.raw_path.split("/")[2:]
        route = (request.method, parts[0] if parts else "")
        if route[1] == "items":
            return self._control_items(request, parts[1:])
        if route == ("GET", "directory"):
            return Response.json(200, self.directory.model_dump())
        if route == ("PUT", "directory"):
            try:
                directory = Directory.model_validate(request.json() or {})
            except (ValidationError, ValueError) as exc:
                return Response.json(400, {"error": str(exc)})
            with self._lock:
                self.directory = directory
            return Response.json(200, directory.model_dump())
        if route == ("POST", "tokens") and parts[1:] == ["revoke"]:
            with self._lock:
                revoked = len(self._tokens)
                self._tokens.clear()
            return Response.json(200, {"revoked": revoked})
        if route == ("POST", "barriers"):
            spec = request.json() or {}
            try:
                parties, timeout_ms, operation = (
                    int(spec["parties"]),
                    int(spec.get("timeout_ms", 10000)),
                    spec["operation"],
                )
            except (KeyError, TypeError, ValueError):
                return Response.json(400, {"error": "need operation, parties and optionally timeout_ms"})
            if parties < 1:
                return Response.json(400, {"error": "parties must be at least 1"})
            with self._lock:
                self._barriers.append(_Barrier(operation, threading.Barrier(parties), timeout_ms / 1000, parties))
            return Response.json(201, {"operation": operation, "parties": parties, "timeout_ms": timeout_ms})
        return None

    def items(self, mailbox: str | None = None) -> list[dict[str, Any]]:
        """Stored items as JSON objects, optionally for one mailbox."""
        with self._lock:
            return [i.to_json() for i in self._items.values() if mailbox is None or i.mailbox == mailbox.lower()]

    # --- control helpers --------------------------------------------------------------------

    def _control_items(self, request: Request, rest: list[str]) -> Response | None:
        if not rest:
            if request.method != "GET":
                return None
            mailbox = request.query.get("mailbox", [None])[0]
            return Response.json(200, self.items(mailbox))
        item_id = unquote(rest[0])
        with self._lock:
            item = self._items.get(item_id)
            if item is None:
                return Response.json(404, {"error": f"no item {item_id}"})
            if request.method == "GET":
                return Response.json(200, item.to_json())
            if request.method == "DELETE":
                del self._items[item_id]
                return Response.json(200, {"deleted": item_id})
            if request.method == "PATCH":
                changes = request.json() or {}
                for name, tag in (("subject", "Subject"), ("location", "Location")):
                    if name in changes:
                        elem = ET.Element(f"{_T}{tag}")
                        elem.text = str(changes[name])
                        item.fields[tag] = elem
                item.change_key = self._next_change_key()
                return Response.json(200, item.to_json())
        return None

    # --- auth -------------------------------------------------------------------------------

    def _authenticate(self, request: Request) -> _Identity | None:
        header = request.header("Authorization") or ""
        scheme, _, value = header.partition(" ")
        with self._lock:
            if scheme.lower() == "basic":
                try:
                    username, _, password = base64.b64decode(value).decode().partition(":")
                except (binascii.Error, UnicodeDecodeError):
                    return None
                user = self.directory.user(username)
                if user is None or not secrets.compare_digest(user.password, password):
                    return None
                return username, "basic", user
            if scheme.lower() == "bearer":
                token = self._tokens.get(value.strip())
                if token is None or token[1] < time.monotonic():
                    return None
                return token[0], "bearer", None
        return None

    def _token(self, request: Request, tenant: str) -> Response:
        form = {k: v[0] for k, v in parse_qs(request.body.decode(errors="replace")).items()}
        client_id, client_secret = form.get("client_id", ""), form.get("client_secret", "")
        basic = request.header("Authorization") or ""
        if basic.lower().startswith("basic "):
            try:
                client_id, _, client_secret = base64.b64decode(basic[6:]).decode().partition(":")
            except (binascii.Error, UnicodeDecodeError):
                client_id = client_secret = ""
        log: dict[str, Any] = {"operation": "token", "client_id": client_id}

        def refuse(status: int, error: str, text: str) -> Response:
            answer = Response.json(status, {"error": error, "error_description": text})
            answer.log = {**log, "outcome": error}
            return answer

        if form.get("grant_type") != "client_credentials":
            return refuse(400, "unsupported_grant_type", "Only client_credentials is supported.")
        with self._lock:
            client = self.directory.clients.get(client_id)
            if client is None:
                return refuse(400, "unauthorized_client", f"Application {client_id!r} was not found.")
            if client.tenant is not None and client.tenant != tenant:
                return refuse(400, "invalid_request", f"Tenant {tenant!r} not found.")
            if not secrets.compare_digest(client.secret, client_secret):
                return refuse(401, "invalid_client", "Invalid client secret provided.")
            token = secrets.token_urlsafe(24)
            self._tokens[token] = (client_id, time.monotonic() + 3600)
        answer = Response.json(
            200, {"token_type": "Bearer", "expires_in": 3599, "ext_expires_in": 3599, "access_token": token}
        )
        answer.log = {**log, "outcome": "issued"}
        return answer

    def _caller(self, header: ET.Element | None, identity: _Identity) -> _Caller:
        principal, auth, user = identity
        impersonation = None if header is None else header.find(f"{_T}ExchangeImpersonation")
        caller = _Caller(principal, auth, user, None)
        if impersonation is None:
            if user is None:
                raise _EwsError(
                    "ErrorInvalidExchangeImpersonationHeaderData",
                    "ExchangeImpersonation SOAP header must be present for this type of OAuth token.",
                    fault=True,
                )
            return caller
        address = (
            impersonation.findtext(f"{_T}ConnectingSID/{_T}PrimarySmtpAddress")
            or impersonation.findtext(f"{_T}ConnectingSID/{_T}SmtpAddress")
            or ""
        ).lower()
        if user is not None and not user.impersonation:
            raise _EwsError(
                "ErrorImpersonateUserDenied", "The account does not have permission to impersonate.", fault=True
            )
        with self._lock:
            exists = self.directory.mailbox_exists(address)
        if not exists:
            raise _EwsError("ErrorNonExistentMailbox", f"The SMTP address {address} has no mailbox.", fault=True)
        caller.impersonating = address
        return caller

    def _authorize(self, caller: _Caller, mailbox: str | None) -> str:
        """The mailbox the caller may touch, or an item-level error."""
        if not mailbox:
            raise _EwsError("ErrorMissingEmailAddress", "The mailbox could not be determined.")
        mailbox = mailbox.lower()
        with self._lock:
            exists = self.directory.mailbox_exists(mailbox)
        if not exists:
            raise _EwsError("ErrorNonExistentMailbox", f"The SMTP address {mailbox} has no mailbox.")
        if caller.impersonating:
            allowed = mailbox == caller.impersonating
        else:
            delegates = {d.lower() for d in (caller.user.delegate_for if caller.user else [])}
            allowed = mailbox == caller.default_mailbox or "*" in delegates or mailbox in delegates
        if not allowed:
            raise _EwsError("ErrorAccessDenied", "Access is denied. Check credentials and try again.")
        return mailbox

    # --- SOAP -------------------------------------------------------------------------------

    def _soap(self, request: Request) -> Response:
        op = soap_operation(request.body)
        log: dict[str, Any] = {"operation": op, "mailbox": (request.header("X-AnchorMailbox") or "").lower() or None}
        identity = self._authenticate(request)
        if identity is None:
            return _unauthorized(log)
        log.update(principal=identity[0], auth=identity[1])
        self._wait_at_barrier(op, log)
        try:
            envelope = ET.fromstring(request.body)
            body = envelope.find(f"{_S}Body")
            operation = None if body is None or len(body) == 0 else body[0]
            if operation is None:
                raise _EwsError("ErrorSchemaValidation", "The request failed schema validation.", fault=True)
            op = log["operation"] = _local(operation.tag)
            handler = self._ops.get(op)
            if handler is None:
                raise _EwsError("ErrorInvalidOperation", f"The operation {op} is not supported.", fault=True)
            caller = self._caller(envelope.find(f"{_S}Header"), identity)
            caller.log = log
            log["access"] = "impersonation" if caller.impersonating else "delegate"
            messages = handler(operation, caller)
        except ET.ParseError:
            return _xml_response(500, _fault("ErrorSchemaValidation", "The request is not valid XML."), log)
        except _EwsError as exc:
            log["response_codes"] = [exc.code]
            return _xml_response(500, _fault(exc.code, exc.message), log)
        log["response_codes"] = [self._code_of(m) for m in messages]
        return _xml_response(200, _soap_response(op, messages), log)

    @staticmethod
    def _code_of(message: str) -> str:
        match = re.search(r"<m:ResponseCode>(\w+)</m:ResponseCode>", message)
        return match.group(1) if match else "NoError"

    def _wait_at_barrier(self, op: str | None, log: dict[str, Any]) -> None:
        with self._lock:
            barrier = next((b for b in self._barriers if b.operation == op and b.slots > 0), None)
            if barrier is None:
                return
            barrier.slots -= 1
        try:
            barrier.barrier.wait(barrier.timeout)
            log["barrier"] = "met"
        except threading.BrokenBarrierError:
            log["barrier"] = "broken"

    def _per_item(self, op: str, elems: Iterable[ET.Element], serve: Callable[[ET.Element], str]) -> list[str]:
        messages = []
        for elem in elems:
            try:
                messages.append(_success(op, serve(elem)))
            except _EwsError as exc:
                if exc.fault:
                    raise
                messages.append(_error(op, exc.code, exc.message))
        return messages

    def _item_count(self, op: str, body: bytes) -> int:
        try:
            operation = ET.fromstring(body).find(f"{_S}Body/{_M}{op}")
        except ET.ParseError:
            return 1
        if operation is None:
            return 1
        containers = {
            "CreateItem": f"{_M}Items",
            "UpdateItem": f"{_M}ItemChanges",
            "GetItem": f"{_M}ItemIds",
            "DeleteItem": f"{_M}ItemIds",
            "GetFolder": f"{_M}FolderIds",
            "FindItem": f"{_M}ParentFolderIds",
        }
        container = operation.find(containers[op]) if op in containers else None
        return max(1, len(container)) if container is not None else 1

    # --- folders ----------------------------------------------------------------------------

    @staticmethod
    def _folder_id(mailbox: str, name: str) -> str:
        return base64.urlsafe_b64encode(f"folder:{mailbox}:{name}".encode()).decode()

    def _folder_of(self, elem: ET.Element, caller: _Caller) -> tuple[str, str]:
        """(mailbox, distinguished name) of a DistinguishedFolderId or FolderId element."""
        if _local(elem.tag) == "DistinguishedFolderId":
            mailbox = elem.findtext(f"{_T}Mailbox/{_T}EmailAddress") or caller.default_mailbox
            return self._authorize(caller, mailbox), elem.get("Id", "")
        try:
            kind, mailbox, name = base64.urlsafe_b64decode(elem.get("Id", "")).decode().split(":", 2)
        except (binascii.Error, UnicodeDecodeError, ValueError):
            raise _EwsError("ErrorInvalidIdMalformed", "Id is malformed.") from None
        if kind != "folder":
            raise _EwsError("ErrorFolderNotFound", "The specified folder could not be found in the store.")
        return self._authorize(caller, mailbox), name

    def _get_folder(self, operation: ET.Element, caller: _Caller) -> list[str]:
        ids = operation.find(f"{_M}FolderIds")

        def serve(elem: ET.Element) -> str:
            mailbox, name = self._folder_of(elem, caller)
            with self._lock:
                count = sum(1 for i in self._items.values() if i.mailbox == mailbox)
            tag, folder_class, display = (
                ("CalendarFolder", "IPF.Appointment", "Calendar") if name == "calendar" else ("Folder", None, name)
            )
            klass = f"<t:FolderClass>{folder_class}</t:FolderClass>" if folder_class else ""
            return (
                f'<m:Folders><t:{tag}><t:FolderId Id="{self._folder_id(mailbox, name)}" ChangeKey="AQAAAA=="/>'
                f'<t:ParentFolderId Id="{self._folder_id(mailbox, "root")}" ChangeKey="AQAAAA=="/>{klass}'
                f"<t:DisplayName>{escape(display)}</t:DisplayName><t:TotalCount>{count if tag != 'Folder' else 0}"
                f"</t:TotalCount><t:ChildFolderCount>0</t:ChildFolderCount><t:UnreadCount>0</t:UnreadCount>"
                f"</t:{tag}></m:Folders>"
            )

        return self._per_item("GetFolder", [] if ids is None else list(ids), serve)

    # --- items ------------------------------------------------------------------------------

    def _next_change_key(self) -> str:
        with self._lock:
            self._changes += 1
            return base64.b64encode(f"CK{self._changes:08d}".encode()).decode()

    def _lookup(self, item_id: str, caller: _Caller) -> _Item:
        try:
            valid = base64.urlsafe_b64decode(item_id.encode()).startswith(_ITEM_ID_PREFIX)
        except (binascii.Error, ValueError):
            valid = False
        if not valid:
            raise _EwsError("ErrorInvalidIdMalformed", "Id is malformed.")
        with self._lock:
            item = self._items.get(item_id)
        if item is None:
            raise _EwsError("ErrorItemNotFound", "The specified object was not found in the store.")
        self._authorize(caller, item.mailbox)
        return item

    @staticmethod
    def _check_times(fields: Mapping[str, ET.Element]) -> None:
        start, end = fields.get("Start"), fields.get("End")
        if start is None or end is None:
            return
        try:
            ordered = _parse_time(start.text or "") <= _parse_time(end.text or "")
        except ValueError:
            raise _EwsError("ErrorSchemaValidation", "Start or End is not a valid xs:dateTime.") from None
        if not ordered:
            raise _EwsError("ErrorCalendarEndDateIsEarlierThanStartDate", "The end date occurs before the start date.")

    @staticmethod
    def _notified(mode: str | None, item: _Item) -> list[str]:
        if mode not in _SENDING_MODES:
            return []
        return sorted({*item.attendees("RequiredAttendees"), *item.attendees("OptionalAttendees")})

    def _create_item(self, operation: ET.Element, caller: _Caller) -> list[str]:
        mode = operation.get("SendMeetingInvitations")
        caller.log["send_meeting_invitations"] = mode
        target = operation.find(f"{_M}SavedItemFolderId")
        folder = None if target is None or len(target) == 0 else target[0]
        items = operation.find(f"{_M}Items")
        notified: set[str] = set()

        def serve(elem: ET.Element) -> str:
            if folder is None:
                mailbox, name = self._authorize(caller, caller.default_mailbox), "calendar"
            else:
                mailbox, name = self._folder_of(folder, caller)
            if _local(elem.tag) != "CalendarItem" or name != "calendar":
                raise _EwsError("ErrorInvalidOperation", "The emulator stores calendar items in the calendar only.")
            item = _Item(self._new_item_id(), mailbox, self._next_change_key())
            for child in elem:
                if _local(child.tag) == "ExtendedProperty":
                    uri = child.find(f"{_T}ExtendedFieldURI")
                    if uri is None:
                        raise _EwsError("ErrorSchemaValidation", "ExtendedProperty without ExtendedFieldURI.")
                    item.extended[_prop_key(uri)] = copy.deepcopy(child)
                else:
                    item.fields[_local(child.tag)] = _stored(child)
            self._check_times(item.fields)
            with self._lock:
                self._items[item.id] = item
            notified.update(self._notified(mode, item))
            return f'<m:Items><t:CalendarItem><t:ItemId Id="{item.id}" ChangeKey="{item.change_key}"/>{_END_ITEMS}'

        messages = self._per_item("CreateItem", [] if items is None else list(items), serve)
        caller.log["notified"] = sorted(notified)
        return messages

    @staticmethod
    def _new_item_id() -> str:
        return base64.urlsafe_b64encode(_ITEM_ID_PREFIX + uuid.uuid4().bytes).decode()

    def _shape(self, shape: ET.Element | None) -> tuple[bool, set[str], set[str]]:
        """(all properties?, field names, extended property keys) an ItemShape asks for."""
        if shape is None:
            return False, set(), set()
        everything = shape.findtext(f"{_T}BaseShape") in ("AllProperties", "Default")
        names, extended = set(), set()
        for path in shape.findall(f"{_T}AdditionalProperties/*"):
            if _local(path.tag) == "ExtendedFieldURI":
                extended.add(_prop_key(path))
            elif path.get("FieldURI"):
                names.add(path.get("FieldURI", "").split(":", 1)[-1])
        return everything, names, extended

    @staticmethod
    def _render(item: _Item, shape: tuple[bool, set[str], set[str]]) -> str:
        everything, names, extended = shape
        parts = [f'<t:ItemId Id="{item.id}" ChangeKey="{item.change_key}"/>']
        parts += [_xml(e) for name, e in item.fields.items() if everything or name in names]
        parts += [_xml(e) for key, e in item.extended.items() if everything or key in extended]
        return "<t:CalendarItem>" + "".join(parts) + "</t:CalendarItem>"

    def _value_at(self, item: _Item, path: ET.Element) -> str | None:
        if _local(path.tag) == "ExtendedFieldURI":
            prop = item.extended.get(_prop_key(path))
            return None if prop is None else prop.findtext(f"{_T}Value")
        if _local(path.tag) == "FieldURI":
            return item.text(path.get("FieldURI", "").split(":", 1)[-1])
        raise _EwsError("ErrorUnsupportedPathForQuery", "The property path is not supported in a restriction.")

    def _matches(self, item: _Item, expr: ET.Element) -> bool:
        kind = _local(expr.tag)
        if kind == "And":
            return all(self._matches(item, e) for e in expr)
        if kind == "Or":
            return any(self._matches(item, e) for e in expr)
        if kind == "Not":
            return not self._matches(item, expr[0])
        if kind == "Exists":
            return self._value_at(item, expr[0]) is not None
        if kind in ("IsEqualTo", "IsNotEqualTo"):
            constant = expr.find(f"{_T}FieldURIOrConstant/{_T}Constant")
            if constant is None:
                raise _EwsError("ErrorUnsupportedQueryFilter", "Only comparisons with a constant are supported.")
            equal = self._value_at(item, expr[0]) == constant.get("Value")
            return equal if kind == "IsEqualTo" else not equal
        raise _EwsError("ErrorUnsupportedQueryFilter", f"The restriction {kind} is not supported.")

    def _find_item(self, operation: ET.Element, caller: _Caller) -> list[str]:
        shape = self._shape(operation.find(f"{_M}ItemShape"))
        restriction = operation.find(f"{_M}Restriction")
        view = operation.find(f"{_M}IndexedPageItemView")
        offset = int(view.get("Offset", "0")) if view is not None else 0
        limit = int(view.get("MaxEntriesReturned", "1000")) if view is not None else 1000
        parents = operation.find(f"{_M}ParentFolderIds")

        def serve(elem: ET.Element) -> str:
            mailbox, name = self._folder_of(elem, caller)
            with self._lock:
                items = [i for i in self._items.values() if i.mailbox == mailbox and name == "calendar"]
            if restriction is not None and len(restriction):
                items = [i for i in items if self._matches(i, restriction[0])]
            page = items[offset : offset + limit]
            last = "true" if offset + len(page) >= len(items) else "false"
            return (
                f'<m:RootFolder IndexedPagingOffset="{offset + len(page)}" TotalItemsInView="{len(items)}" '
                f'IncludesLastItemInRange="{last}"><t:Items>'
                + "".join(self._render(i, shape) for i in page)
                + "</t:Items></m:RootFolder>"
            )

        return self._per_item("FindItem", [] if parents is None else list(parents), serve)

    def _get_item(self, operation: ET.Element, caller: _Caller) -> list[str]:
        shape = self._shape(operation.find(f"{_M}ItemShape"))
        ids = operation.find(f"{_M}ItemIds")

        def serve(elem: ET.Element) -> str:
            item = self._lookup(elem.get("Id", ""), caller)
            return f"<m:Items>{self._render(item, shape)}</m:Items>"

        return self._per_item("GetItem", [] if ids is None else list(ids), serve)

    def _update_item(self, operation: ET.Element, caller: _Caller) -> list[str]:
        mode = operation.get("SendMeetingInvitationsOrCancellations")
        resolution = operation.get("ConflictResolution", "AutoResolve")
        caller.log.update(send_meeting_invitations_or_cancellations=mode, conflict_resolution=resolution)
        changes = operation.find(f"{_M}ItemChanges")
        notified: set[str] = set()

        def serve(change: ET.Element) -> str:
            item_id = change.find(f"{_T}ItemId")
            if item_id is None:
                raise _EwsError("ErrorSchemaValidation", "ItemChange without ItemId.")
            with self._lock:
                item = self._lookup(item_id.get("Id", ""), caller)
                change_key = item_id.get("ChangeKey")
                if change_key is None and resolution != "AlwaysOverwrite":
                    raise _EwsError(
                        "ErrorChangeKeyRequiredForWriteOperations", "A ChangeKey is required for this update."
                    )
                if change_key is not None and change_key != item.change_key and resolution != "AlwaysOverwrite":
                    raise _EwsError(
                        "ErrorIrresolvableConflict",
                        "The send or update operation could not be performed because "
                        "the change key passed in the request does not match the current change key for the item.",
                    )
                fields, extended = dict(item.fields), dict(item.extended)
                for update in change.findall(f"{_T}Updates/*"):
                    self._apply_update(update, fields, extended)
                self._check_times(fields)
                item.fields, item.extended = fields, extended
                item.change_key = self._next_change_key()
                notified.update(self._notified(mode, item))
                return (
                    f'<m:Items><t:CalendarItem><t:ItemId Id="{item.id}" ChangeKey="{item.change_key}"/>{_END_ITEMS}'
                    "<m:ConflictResults><t:Count>0</t:Count></m:ConflictResults>"
                )

        messages = self._per_item("UpdateItem", [] if changes is None else list(changes), serve)
        caller.log["notified"] = sorted(notified)
        return messages

    @staticmethod
    def _apply_update(update: ET.Element, fields: dict[str, ET.Element], extended: dict[str, ET.Element]) -> None:
        kind = _local(update.tag)
        path = update[0] if len(update) else None
        if path is None:
            raise _EwsError("ErrorSchemaValidation", f"{kind} without a property path.")
        if _local(path.tag) == "ExtendedFieldURI":
            key = _prop_key(path)
            if kind == "DeleteItemField":
                extended.pop(key, None)
                return
            prop = update.find(f"./{_T}CalendarItem/{_T}ExtendedProperty")
            if prop is None:
                raise _EwsError("ErrorInvalidExtendedProperty", "The extended property value is missing.")
            extended[key] = copy.deepcopy(prop)
            return
        name = path.get("FieldURI", "").split(":", 1)[-1]
        if kind == "DeleteItemField":
            fields.pop(name, None)
            return
        value = update.find(f"./{_T}CalendarItem/{_T}{name}")
        if value is None:
            raise _EwsError("ErrorSchemaValidation", f"{kind} for {name} carries no {name} element.")
        fields[name] = _stored(value)

    def _delete_item(self, operation: ET.Element, caller: _Caller) -> list[str]:
        mode = operation.get("SendMeetingCancellations")
        caller.log["send_meeting_cancellations"] = mode
        ids = operation.find(f"{_M}ItemIds")
        notified: set[str] = set()

        def serve(elem: ET.Element) -> str:
            with self._lock:
                item = self._lookup(elem.get("Id", ""), caller)
                del self._items[item.id]
            notified.update(self._notified(mode, item))
            return ""

        messages = self._per_item("DeleteItem", [] if ids is None else list(ids), serve)
        caller.log["notified"] = sorted(notified)
        return messages

    def _convert_id(self, operation: ET.Element, caller: _Caller) -> list[str]:
        ids = operation.find(f"{_M}SourceIds")

        def serve(elem: ET.Element) -> str:
            raise _EwsError("ErrorInvalidIdMalformed", "Id is malformed.")

        return self._per_item("ConvertId", [] if ids is None else list(ids), serve)


class EwsControl:
    """A typed client of the control API above, for tests and the demo (stdlib only, so usable anywhere)."""

    def __init__(self, base_url: str, timeout: float = 30) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never via HTTP(S)_PROXY

    def _call(self, method: str, route: str, payload: Any = None) -> Any:
        data = None if payload is None else json.dumps(payload).encode()
        request = urllib.request.Request(
            f"{self.base_url}/_emulator/{route}", data=data, method=method, headers={"Content-Type": "application/json"}
        )
        with self._opener.open(request, timeout=self.timeout) as answer:
            return json.loads(answer.read() or b"null")

    def reset(self) -> None:
        """Forget items, tokens, barriers, faults and the request log."""
        self._call("POST", "reset")

    def requests(self, operation: str | None = None) -> list[dict[str, Any]]:
        """The request log, optionally only one SOAP operation (or ``token``)."""
        log: list[dict[str, Any]] = self._call("GET", "requests")
        return [r for r in log if operation is None or r.get("operation") == operation]

    def wait_for_requests(self, operation: str, count: int, timeout: float = 10) -> list[dict[str, Any]]:
        """Block until the log holds ``count`` entries for ``operation`` (e.g. a delayed request that finished)."""
        deadline = time.monotonic() + timeout
        while len(found := self.requests(operation)) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(found)} of {count} {operation} requests logged after {timeout} s")
            time.sleep(0.01)
        return found

    def items(self, mailbox: str | None = None) -> list[dict[str, Any]]:
        """Stored items, optionally of one mailbox."""
        query = "" if mailbox is None else "?" + urlencode({"mailbox": mailbox})
        items: list[dict[str, Any]] = self._call("GET", f"items{query}")
        return items

    def item(self, item_id: str) -> dict[str, Any]:
        """One stored item."""
        item: dict[str, Any] = self._call("GET", f"items/{quote(item_id, safe='')}")
        return item

    def edit_item(self, item_id: str, **changes: str) -> dict[str, Any]:
        """Edit an item as its owner would in Outlook (new ChangeKey)."""
        item: dict[str, Any] = self._call("PATCH", f"items/{quote(item_id, safe='')}", changes)
        return item

    def delete_item(self, item_id: str) -> None:
        """Delete an item as its owner would in Outlook."""
        self._call("DELETE", f"items/{quote(item_id, safe='')}")

    def add_fault(self, **rule: Any) -> dict[str, Any]:
        """Install an :class:`EwsFaultRule`."""
        answer: dict[str, Any] = self._call("POST", "faults", rule)
        return answer

    def faults(self) -> list[dict[str, Any]]:
        """The fault rules still active, with what is left of their ``times``."""
        rules: list[dict[str, Any]] = self._call("GET", "faults")
        return rules

    def clear_faults(self) -> None:
        """Remove every fault rule."""
        self._call("DELETE", "faults")

    def set_directory(self, directory: Directory | Mapping[str, Any]) -> None:
        """Replace who may log in and which mailboxes exist."""
        payload = directory.model_dump() if isinstance(directory, Directory) else dict(directory)
        self._call("PUT", "directory", payload)

    def revoke_tokens(self) -> int:
        """Invalidate every issued bearer token; returns how many there were."""
        answer: dict[str, int] = self._call("POST", "tokens/revoke")
        return answer["revoked"]

    def add_barrier(self, operation: str, parties: int, timeout_ms: int = 10000) -> None:
        """Make the next ``parties`` requests for ``operation`` wait for each other."""
        self._call("POST", "barriers", {"operation": operation, "parties": parties, "timeout_ms": timeout_ms})


def create_app(directory: Mapping[str, Any] | Directory | None = None) -> EwsEmulator:
    """The EWS emulator app, with :data:`DEFAULT_DIRECTORY` unless a directory is given."""
    if directory is not None and not isinstance(directory, Directory):
        directory = Directory.model_validate(directory)
    return EwsEmulator(directory)

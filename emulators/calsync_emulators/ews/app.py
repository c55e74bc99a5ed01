"""The EWS emulator app: the SOAP endpoint, the token endpoint, fault rendering and the control routes wired up."""

from __future__ import annotations

import re
import threading
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field

from calsync_emulators.ews.barriers import Barriers
from calsync_emulators.ews.control_routes import ControlRoutes
from calsync_emulators.ews.directory import DEFAULT_DIRECTORY, Access, Directory
from calsync_emulators.ews.mailbox import MailboxStore
from calsync_emulators.ews.operations import Operations, item_count
from calsync_emulators.ews.soap import (
    EwsError,
    S,
    error,
    fault,
    html_response,
    local,
    response_code,
    soap_operation,
    soap_response,
    unauthorized,
    xml_response,
)
from calsync_emulators.faults import FaultRule
from calsync_emulators.server import EmulatorApp, Request, Response

EWS_PATH = "/ews/exchange.asmx"
_TOKEN_PATH_RE = re.compile(r"^/(?P<tenant>[^/]+)/oauth2/v2\.0/token$")


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


def _anchor_log(request: Request, op: str | None) -> dict[str, Any]:
    return {"operation": op, "mailbox": (request.header("X-AnchorMailbox") or "").lower() or None}


class EwsEmulator(EmulatorApp):
    """The EWS calendar subset plus an OAuth2 client-credentials token endpoint."""

    rule_type = EwsFaultRule

    def __init__(self, directory: Directory | None = None) -> None:
        super().__init__()
        self._lock = threading.RLock()
        self.access = Access(directory or DEFAULT_DIRECTORY, self._lock)
        self.store = MailboxStore(self._lock)
        self.barriers = Barriers(self._lock)
        self._operations = Operations(self.store, self.access)
        self._control = ControlRoutes(self.store, self.access, self.barriers)

    @property
    def lock(self) -> threading.RLock:
        """The lock guarding the store, the directory and the tokens (shared with the Graph front end)."""
        return self._lock

    @property
    def directory(self) -> Directory:
        """Who may log in and which mailboxes exist, right now."""
        return self.access.directory

    def reset(self) -> None:
        """Forget items, tokens and barriers; restore the directory the app was created with."""
        with self._lock:
            self.access.reset()
            self.store.reset()
            self.barriers.reset()

    def handle(self, request: Request) -> Response:
        """Route to the SOAP endpoint or the token endpoint."""
        token_path = _TOKEN_PATH_RE.match(request.path)
        if token_path:
            return self.access.token(request, token_path.group("tenant"))
        if request.path.lower() != EWS_PATH:
            return html_response(404)
        if request.method != "POST":
            return html_response(405, {"Allow": "POST"})
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
        log = _anchor_log(request, op)
        level = rule.level if isinstance(rule, EwsFaultRule) else "item"
        if rule.reason and level == "fault":
            back_off = None if rule.retry_after is None else int(rule.retry_after * 1000)
            return xml_response(rule.status or 500, fault(rule.reason, message, back_off), log)
        if rule.reason and op:
            count = item_count(op, request.body)
            return xml_response(200, soap_response(op, [error(op, rule.reason, message)] * count), log)
        status = rule.status or 500
        headers: dict[str, str] = {}
        if rule.retry_after is not None:
            headers["Retry-After"] = f"{rule.retry_after:g}"
        if 300 <= status < 400:
            headers["Location"] = "https://mail.example.net/EWS/Exchange.asmx"
        if status == 401:
            return unauthorized(log)
        return html_response(status, headers, log)

    def control(self, request: Request) -> Response | None:
        """Items, directory, token revocation and barriers (contract in the package docstring)."""
        return self._control.serve(request)

    def items(self, mailbox: str | None = None) -> list[dict[str, Any]]:
        """Stored items as JSON objects, optionally for one mailbox."""
        return self.store.to_json(mailbox)

    def _soap(self, request: Request) -> Response:
        op = soap_operation(request.body)
        log = _anchor_log(request, op)
        identity = self.access.authenticate(request)
        if identity is None:
            return unauthorized(log)
        log.update(principal=identity[0], auth=identity[1])
        self.barriers.wait(op, log)
        try:
            envelope = ET.fromstring(request.body)
            body = envelope.find(f"{S}Body")
            operation = None if body is None or len(body) == 0 else body[0]
            if operation is None:
                raise EwsError("ErrorSchemaValidation", "The request failed schema validation.", fault=True)
            op = log["operation"] = local(operation.tag)
            handler = self._operations.handlers.get(op)
            if handler is None:
                raise EwsError("ErrorInvalidOperation", f"The operation {op} is not supported.", fault=True)
            caller = self.access.caller(envelope.find(f"{S}Header"), identity)
            caller.log = log
            log["access"] = "impersonation" if caller.impersonating else "delegate"
            messages = handler(operation, caller)
        except ET.ParseError:
            return xml_response(500, fault("ErrorSchemaValidation", "The request is not valid XML."), log)
        except EwsError as exc:
            log["response_codes"] = [exc.code]
            return xml_response(500, fault(exc.code, exc.message), log)
        log["response_codes"] = [response_code(m) for m in messages]
        return xml_response(200, soap_response(op, messages), log)


def create_app(directory: Mapping[str, Any] | Directory | None = None) -> EwsEmulator:
    """The EWS emulator app, with :data:`DEFAULT_DIRECTORY` unless a directory is given."""
    if directory is not None and not isinstance(directory, Directory):
        directory = Directory.model_validate(directory)
    return EwsEmulator(directory)

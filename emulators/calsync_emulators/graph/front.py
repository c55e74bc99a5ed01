"""The Graph v1.0 events front end over the shared mailbox store: routes, auth, policy, concurrency, transactionId.

Routes (``/v1.0/users/{id|upn}/…``): ``calendar/events`` and ``calendars/{id}/events`` (POST create, GET list),
``events`` (GET list across calendars, POST), ``events/{id}`` and ``calendar/events/{id}`` (GET, PATCH, DELETE),
``calendarView/delta`` (:mod:`.delta`).
Documented behaviour kept: 201 on create, ``@odata.etag`` = ``W/"<ChangeKey>"`` and a new one per change,
``If-Match`` mismatch → 412, DELETE → 204, unknown id → 404 ``ErrorItemNotFound``; ``$filter`` on
``singleValueExtendedProperties/Any(ep: ep/id eq '…' and ep/value eq '…')`` (the Name part case-sensitive,
the value case-insensitive) and ``$expand=singleValueExtendedProperties($filter=id eq '…')``; a replayed
create with the same ``transactionId`` and body → 201 with the first event, with another body → 400
``ErrorDuplicateTransactionId`` (what clients observed; Microsoft documents no window); 401
``InvalidAuthenticationToken`` without a live token; 403 ``ErrorAccessDenied`` "Access to OData is disabled."
outside the app's application access policy; 404 ``MailboxNotEnabledForRESTAPI`` for REST-disabled
mailboxes; 429 ``ApplicationThrottled`` "…MailboxConcurrency limit." + ``Retry-After: 1`` when more than
``mailbox_concurrency`` (4) requests of one mailbox are in flight. Graph ids are immutable ids, distinct
from EWS ItemIds (an EWS id answers 400 ``ErrorInvalidIdMalformed``). Our simplifications: one calendar
per mailbox (any calendar id names it), no paging, ``$select`` ignored, a delegated token reaches only its own
mailbox, meetings are "sent" into the request log (``notified``) whenever an event with attendees is
created, changed or deleted.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections import Counter
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote

from calsync_emulators.ews.directory import Access
from calsync_emulators.ews.mailbox import MailboxStore, check_times
from calsync_emulators.ews.soap import EwsError
from calsync_emulators.graph.convert import apply, etag_of, property_key, property_value, render, store_id
from calsync_emulators.graph.delta import DeltaFeed, is_delta
from calsync_emulators.graph.entra import Entra
from calsync_emulators.graph.errors import GraphError, graph_error
from calsync_emulators.server import Request, Response

API_PREFIX = "/v1.0/"
DEFAULT_MAILBOX_CONCURRENCY = 4
_FILTER = re.compile(
    r"^\s*singleValueExtendedProperties/any\(\s*(\w+)\s*:\s*\1/id\s+eq\s+'((?:[^']|'')*)'\s+and\s+"
    r"\1/value\s+eq\s+'((?:[^']|'')*)'\s*\)\s*$",
    re.IGNORECASE,
)
_EXPAND = re.compile(r"^\s*singleValueExtendedProperties\(\s*\$filter=id\s+eq\s+'((?:[^']|'')*)'\s*\)\s*$", re.I)
_OPAQUE = {"calendar", "events"}


def _unquote_odata(text: str) -> str:
    return text.replace("''", "'")


def split_path(request: Request) -> list[str]:
    """The path below /v1.0/, segment by segment, each percent-decoded."""
    return [unquote(p) for p in request.raw_path[len(API_PREFIX) :].strip("/").split("/") if p]


def operation_of(request: Request) -> str:
    """``events.create|list|get|update|delete|delta`` (fault rules and the request log)."""
    parts = split_path(request)
    if request.method == "GET" and is_delta(parts):
        return "events.delta"
    item = bool(parts) and parts[-1] not in _OPAQUE and len(parts) >= 4 and parts[-2] == "events"
    if request.method == "POST":
        return "events.create"
    if request.method == "GET":
        return "events.get" if item else "events.list"
    return {"PATCH": "events.update", "DELETE": "events.delete"}.get(request.method, request.method.lower())


def mailbox_of(request: Request) -> str | None:
    """The mailbox a Graph request addresses (``/users/{mailbox}/…``)."""
    parts = split_path(request)
    return parts[1].lower() if len(parts) >= 2 and parts[0] == "users" else None


class GraphFrontEnd:
    """Serves the Graph routes; shares the store, the directory and Entra with the EWS front end."""

    def __init__(self, store: MailboxStore, access: Access, entra: Entra, lock: threading.RLock) -> None:
        self._store = store
        self._access = access
        self._entra = entra
        self._lock = lock
        self._delta = DeltaFeed(store)
        self.reset()

    def reset(self) -> None:
        """Forget policies, REST-disabled mailboxes, counters and the configured latency."""
        with self._lock:
            self.mailbox_concurrency = DEFAULT_MAILBOX_CONCURRENCY
            self.latency_ms = 0
            self.policies: dict[str, set[str]] = {}
            self.rest_disabled: set[str] = set()
            self.in_flight: Counter[str] = Counter()
            self.peak: Counter[str] = Counter()
            self.throttled: Counter[str] = Counter()

    def concurrency(self) -> dict[str, Any]:
        """Requests in flight per mailbox now, the most ever in flight at once, and how many were throttled."""
        with self._lock:
            return {"in_flight": dict(+self.in_flight), "peak": dict(self.peak), "throttled": dict(self.throttled),
                    "limit": self.mailbox_concurrency}  # fmt: skip

    def handle(self, request: Request) -> Response:
        """One API request: counted in flight for its mailbox while it is served."""
        mailbox = mailbox_of(request)
        log = {"operation": operation_of(request), "mailbox": mailbox}
        if mailbox is None:
            answer = graph_error(400, "BadRequest", "Resource not found for the segment.")
            answer.log.update(log)
            return answer
        with self._lock:
            self.in_flight[mailbox] += 1
            self.peak[mailbox] = max(self.peak[mailbox], self.in_flight[mailbox])
            over = self.in_flight[mailbox] > self.mailbox_concurrency
            if over:
                self.throttled[mailbox] += 1
            latency = self.latency_ms
        try:
            if over:
                answer = graph_error(429, "ApplicationThrottled", None, retry_after=1)
            else:
                if latency:
                    time.sleep(latency / 1000)
                try:
                    answer = self._serve(request, mailbox, log)
                except GraphError as exc:
                    answer = graph_error(exc.status, exc.code, exc.message)
        finally:
            with self._lock:
                self.in_flight[mailbox] -= 1
        answer.log = {**log, **answer.log}
        return answer

    # --- the API -----------------------------------------------------------------------------------

    def _authorize(self, request: Request, mailbox: str, log: dict[str, Any]) -> None:
        header = request.header("Authorization") or ""
        scheme, _, token = header.partition(" ")
        issued = self._entra.lookup(token.strip()) if scheme.lower() == "bearer" else None
        if issued is None:
            raise GraphError(401, "InvalidAuthenticationToken", "Access token has expired or is not yet valid.")
        log["principal"] = issued.user or issued.client_id
        with self._lock:
            exists = self._access.directory.mailbox_exists(mailbox)
            policy = self.policies.get(issued.client_id)
            disabled = mailbox in self.rest_disabled
        if not exists:
            raise GraphError(404, "ErrorInvalidUser", f"The requested user '{mailbox}' is invalid.")
        if disabled:
            raise GraphError(404, "MailboxNotEnabledForRESTAPI", "REST API is not yet supported for this mailbox.")
        if issued.user is None and policy is not None and mailbox not in policy:
            raise GraphError(403, "ErrorAccessDenied", "Access to OData is disabled.")
        if issued.user is not None and issued.user != mailbox:
            raise GraphError(403, "ErrorAccessDenied", "Access is denied. Check credentials and try again.")

    def _serve(self, request: Request, mailbox: str, log: dict[str, Any]) -> Response:
        self._authorize(request, mailbox, log)
        parts = split_path(request)[2:]
        if is_delta(parts):
            if request.method != "GET":
                raise GraphError(405, "ErrorInvalidRequest", "Method not allowed.")
            return self._delta.serve(request, mailbox, request.raw_path)
        expand = self._expand(request)
        if parts and parts[-1] == "events" and len(parts) <= 3:
            if request.method == "POST":
                return self._create(request, mailbox, log)
            if request.method == "GET":
                return self._list(request, mailbox, expand)
            raise GraphError(405, "ErrorInvalidRequest", "Method not allowed.")
        if len(parts) >= 2 and parts[-2] == "events":
            return self._item(request, mailbox, parts[-1], expand, log)
        raise GraphError(400, "BadRequest", "Resource not found for the segment.")

    @staticmethod
    def _expand(request: Request) -> str | None:
        expand = (request.query.get("$expand") or [""])[-1] or None
        if expand is None:
            return None
        match = _EXPAND.match(expand)
        if match is None:
            raise GraphError(400, "BadRequest", f"Parsing OData Select and Expand failed: {expand}")
        return property_key(_unquote_odata(match.group(1)))[0]

    def _body(self, request: Request) -> dict[str, Any]:
        try:
            body = request.json()
        except ValueError:
            raise GraphError(400, "BadRequest", "Unable to read JSON request payload.") from None
        if not isinstance(body, dict):
            raise GraphError(400, "BadRequest", "The request payload must be a JSON object.")
        return body

    def _create(self, request: Request, mailbox: str, log: dict[str, Any]) -> Response:
        body = self._body(request)
        transaction = body.get("transactionId")
        digest = hashlib.sha256(
            json.dumps({k: v for k, v in body.items() if k != "transactionId"}, sort_keys=True).encode()
        ).hexdigest()
        with self._store.lock:
            if transaction is not None:
                log["transaction_id"] = transaction
                earlier = self._store.with_transaction(mailbox, transaction)
                if earlier is not None:
                    if earlier.created_from != digest:
                        raise GraphError(400, "ErrorDuplicateTransactionId", "Your request can't be completed. The "
                                         "TransactionId specified in the request has already been used to create a "
                                         "different event.")  # fmt: skip
                    log["replayed"] = True
                    return Response.json(201, render(earlier))
            item = self._store.new_item(mailbox)
            apply(item, body)
            self._check(item)
            item.transaction_id, item.created_from = transaction, digest
            self._store.add(item)
        log["notified"] = item.attendees("RequiredAttendees")
        return Response.json(201, render(item))

    def _list(self, request: Request, mailbox: str, expand: str | None) -> Response:
        where = (request.query.get("$filter") or [""])[-1] or None
        items = self._store.in_mailbox(mailbox)
        if where is not None:
            match = _FILTER.match(where)
            if match is None:
                raise GraphError(400, "ErrorInvalidUrlQueryFilter", "The filter clause is not supported.")
            key = property_key(_unquote_odata(match.group(2)))[0]
            value = _unquote_odata(match.group(3)).lower()
            items = [i for i in items if (property_value(i, key) or "").lower() == value]
        with self._store.lock:
            return Response.json(200, {"value": [render(i, expand) for i in items]})

    def _item(self, request: Request, mailbox: str, item_id: str, expand: str | None, log: dict[str, Any]) -> Response:
        with self._store.lock:
            item = self._store.get(store_id(item_id))
            if item is None or item.mailbox != mailbox:
                raise GraphError(404, "ErrorItemNotFound", "The specified object was not found in the store.")
            if request.method == "GET":
                return Response.json(200, render(item, expand))
            if request.method == "DELETE":
                self._store.remove(item.id)
                log["notified"] = item.attendees("RequiredAttendees")
                return Response(204)
            if request.method != "PATCH":
                raise GraphError(405, "ErrorInvalidRequest", "Method not allowed.")
            if_match = request.header("If-Match")
            log["if_match"] = if_match
            if if_match is not None and if_match not in (etag_of(item), "*"):
                raise GraphError(412)
            body = self._body(request)
            if "transactionId" in body and body["transactionId"] != item.transaction_id:
                raise GraphError(400, "ErrorInvalidRequest", "The transactionId of an event cannot be changed.")
            fields, extended = dict(item.fields), dict(item.extended)
            apply(item, body)
            try:
                self._check(item)
            except GraphError:
                item.fields, item.extended = fields, extended
                raise
            self._store.changed(item)
            log["notified"] = item.attendees("RequiredAttendees")
            return Response.json(200, render(item))

    @staticmethod
    def _check(item: Any) -> None:
        try:
            check_times(item.fields)
        except EwsError as exc:
            raise GraphError(400, exc.code, exc.message) from None

    def set_policy(self, client_id: str, mailboxes: list[str] | None) -> None:
        """The app's application access policy: only these mailboxes (None: no policy, every mailbox)."""
        with self._lock:
            if mailboxes is None:
                self.policies.pop(client_id, None)
            else:
                self.policies[client_id] = {m.lower() for m in mailboxes}

    def set_rest_disabled(self, mailboxes: list[str]) -> None:
        """Mailboxes answering MailboxNotEnabledForRESTAPI (on-premises, unlicensed)."""
        with self._lock:
            self.rest_disabled = {m.lower() for m in mailboxes}


def parse_mapping(request: Request) -> Mapping[str, Any]:
    """A control request's JSON object (empty when absent)."""
    body = request.json() or {}
    if not isinstance(body, dict):
        raise ValueError("body must be a JSON object")
    return body

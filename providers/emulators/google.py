"""A Google Calendar v3 emulator: the REST subset calsync uses, Google's wire shapes, and an OAuth token endpoint.

Point the real client at it with ``CALSYNC_GOOGLE_API_ENDPOINT=http://HOST:PORT/calendar/v3/`` and a
credentials JSON whose ``token_uri`` is ``http://HOST:PORT/token``; nothing else changes.

API (``/calendar/v3/calendars/{calendarId}/events[/{eventId}]``, segments percent-decoded one by one):

- ``POST`` insert, ``GET`` get/list, ``PUT`` update, ``PATCH`` patch (``null`` removes a key), ``DELETE``;
- a client-supplied id must match ``[a-v0-9]{5,1024}`` (400 ``invalid``); an id that exists, cancelled
  or not, answers 409 ``duplicate``; DELETE marks ``status: cancelled`` and keeps the event, a second DELETE
  answers 410 ``deleted``, an unknown id 404 ``notFound``; ``If-Match`` with a stale etag answers 412
  ``conditionNotMet``; ``If-None-Match`` with the current etag answers 304; PUT/PATCH of a cancelled event
  is allowed and restores it unless the body keeps ``status: cancelled``;
- list honours ``showDeleted`` (cancelled events are hidden otherwise), ``privateExtendedProperty=k=v``
  (repeatable; every constraint must match), ``maxResults`` (default 250, at most 2500) and ``pageToken``;
  ``showDeleted=true`` returns every stored event, so the real client can inspect the emulator's state;
- every calendar id exists; ``sequence`` grows by one on every PUT/PATCH;
- errors are Google's ``{"error": {"code", "message", "errors": [{"domain", "reason", "message"}], "status"}}``;
- every API call needs ``Authorization: Bearer <token>`` issued by ``POST /token`` and not yet expired,
  else 401 ``authError``.

Token endpoint (``POST /token``, form-encoded):

- ``grant_type=refresh_token``: any client id/secret and any refresh token are accepted unless revoked;
- ``grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer``: the assertion must be a well-formed, unexpired
  RS256 JWT with ``iss``, ``scope``, ``aud``, ``iat`` and ``exp`` (the signature is not checked: the emulator
  has no public keys); ``sub`` is the delegated user;
- answers ``{"access_token", "expires_in", "token_type": "Bearer", "scope"}``; errors are
  ``{"error": "invalid_grant", "error_description": ...}`` (400). Token calls are logged with
  ``grant``, ``subject`` and ``scope`` (never a token); API calls with ``send_updates`` and ``if_match`` when
  the request carried ``sendUpdates`` / ``If-Match``.

Control API (JSON in and out):

- ``POST /_emulator/reset``: forget events, tokens, revocations, faults, the log and the lifetime set below;
- ``GET /_emulator/requests``: ``[{"method", "path", "status", ...}]`` in arrival order, API and token calls,
  ``path`` decoded, ``status`` null for a dropped connection;
- ``POST /_emulator/faults`` ``{"method", "path" (regex searched in the decoded path), "status", "reason",
  "message", "retry_after" (s), "delay_ms", "drop", "after" (apply the request, then break the answer),
  "times", "probability", "style"}``, all optional: the first matching rule wins, ``times`` counts down,
  ``probability`` tosses a coin (seeded by ``create_app(seed=...)``); ``GET`` lists the rules, ``DELETE``
  clears them. A rule without ``path`` also hits ``/token``: give API faults a path such as ``/events``;
- ``"style"`` picks the error body: ``"legacy"`` (default, ``errors[]`` + ``status``),
  ``"details"`` (adds ``details[]`` of ``google.rpc.ErrorInfo``, which changes what
  ``HttpError.error_details`` returns), ``"status_only"`` (no ``errors[]``, like "insufficient
  authentication scopes") or ``"html"`` (a front-end error page). ``reason`` defaults per status
  (e.g. 403 ``forbidden``, 429 ``rateLimitExceeded``, 5xx ``backendError``); ``retry_after`` sets the
  ``Retry-After`` header. On ``/token`` a rule answers in the OAuth shape, with ``reason`` as the OAuth
  ``error`` (default ``server_error`` for 5xx, ``invalid_request`` otherwise);
- ``POST /_emulator/revoke`` ``{"refresh_token": ...}`` or ``{"client_email": ...}``: later grants for it
  answer 400 ``invalid_grant`` and the access tokens already issued for it stop working (401);
- ``POST /_emulator/tokens/expire``: every access token issued so far expires now (the next API call of
  each client gets a 401, which google-auth answers with a refresh);
- ``GET /_emulator/config`` / ``POST /_emulator/config`` ``{"token_lifetime": seconds}``: lifetime of tokens
  issued from now on (0 makes every token expire at once, so every API call answers 401).
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import itertools
import json
import re
import secrets
import threading
import time
import zoneinfo
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, Literal
from urllib.parse import parse_qs, unquote

from calsync.providers.emulators.faults import FaultRule, FaultRules
from calsync.providers.emulators.server import EmulatorApp, Request, Response

API_PREFIX = "/calendar/v3/"
TOKEN_PATH = "/token"
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
DEFAULT_TOKEN_LIFETIME = 3599
DEFAULT_PAGE_SIZE = 250
MAX_PAGE_SIZE = 2500

ErrorStyle = Literal["legacy", "details", "status_only", "html"]

_EVENT_ID = re.compile(r"[a-v0-9]{5,1024}")
_READ_ONLY = frozenset({"kind", "etag", "id", "htmlLink", "created", "updated", "creator", "organizer", "iCalUID"})
_STATUSES = frozenset({"confirmed", "tentative", "cancelled"})

# status -> (default reason, default message, google.rpc status); notes §1.2 for the texts.
_STATUS_DEFAULTS: dict[int, tuple[str, str, str]] = {
    400: ("badRequest", "Bad Request", "INVALID_ARGUMENT"),
    401: ("authError", "Invalid Credentials", "UNAUTHENTICATED"),
    403: ("forbidden", "Forbidden", "PERMISSION_DENIED"),
    404: ("notFound", "Not Found", "NOT_FOUND"),
    409: ("duplicate", "The requested identifier already exists.", "ALREADY_EXISTS"),
    410: ("deleted", "Resource has been deleted", "NOT_FOUND"),
    412: ("conditionNotMet", "Precondition Failed", "FAILED_PRECONDITION"),
    429: ("rateLimitExceeded", "Rate Limit Exceeded", "RESOURCE_EXHAUSTED"),
    500: ("backendError", "Backend Error", "INTERNAL"),
    502: ("backendError", "Bad Gateway", "UNAVAILABLE"),
    503: ("backendError", "The service is currently unavailable.", "UNAVAILABLE"),
    504: ("backendError", "Deadline Exceeded", "DEADLINE_EXCEEDED"),
}
_REASON_MESSAGES = {
    "rateLimitExceeded": "Rate Limit Exceeded",
    "userRateLimitExceeded": "User Rate Limit Exceeded",
    "quotaExceeded": "Calendar usage limits exceeded.",
    "dailyLimitExceeded": "Daily Limit Exceeded",
    "forbiddenForNonOrganizer": "Shared properties can only be changed by the organizer of the event.",
    "forbiddenForServiceAccounts": "Service accounts cannot invite attendees without Domain-Wide Delegation of "
    "Authority.",
    "insufficientPermissions": "Insufficient Permission",
    "timeRangeEmpty": "The specified time range is empty.",
}
_REASON_DOMAINS = {
    "rateLimitExceeded": "usageLimits",
    "userRateLimitExceeded": "usageLimits",
    "quotaExceeded": "usageLimits",
    "dailyLimitExceeded": "usageLimits",
    "forbiddenForNonOrganizer": "calendar",
    "forbiddenForServiceAccounts": "calendar",
    "timeRangeEmpty": "calendar",
}
_REASON_LOCATIONS = {"authError": "Authorization", "conditionNotMet": "If-Match"}


class GoogleFaultRule(FaultRule):
    """A fault rule that can also choose which of Google's error-body shapes to answer with."""

    style: ErrorStyle = "legacy"


class _ApiError(Exception):
    """An API request Google would refuse; becomes an error response in Google's shape."""

    def __init__(self, status: int, reason: str | None = None, message: str | None = None) -> None:
        super().__init__(message or reason or str(status))
        self.status = status
        self.reason = reason
        self.message = message


class _GrantError(Exception):
    """A token request the OAuth server would refuse."""

    def __init__(self, error: str, description: str) -> None:
        super().__init__(description)
        self.error = error
        self.description = description


def _upper_snake(reason: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", reason).upper()


def google_error(
    status: int, reason: str | None = None, message: str | None = None, style: ErrorStyle = "legacy"
) -> Response:
    """An error response exactly as Calendar v3 (or the front end in front of it) writes one."""
    default_reason, default_message, rpc_status = _STATUS_DEFAULTS.get(
        status, ("unknown" if status < 500 else "backendError", _phrase(status), "UNKNOWN")
    )
    reason = reason or default_reason
    message = message or _REASON_MESSAGES.get(reason, default_message)
    if style == "html":
        page = f"<html><head><title>{status} {_phrase(status)}</title></head><body>{message}</body></html>"
        return Response(status, page.encode(), {"Content-Type": "text/html; charset=UTF-8"})
    error: dict[str, Any] = {"code": status, "message": message}
    if style != "status_only":
        item = {"domain": _REASON_DOMAINS.get(reason, "global"), "reason": reason, "message": message}
        if reason in _REASON_LOCATIONS:
            item.update(locationType="header", location=_REASON_LOCATIONS[reason])
        error["errors"] = [item]
    error["status"] = rpc_status
    if style == "details":
        error["details"] = [
            {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": _upper_snake(reason),
                "domain": "googleapis.com",
                "metadata": {"service": "calendar-json.googleapis.com"},
            }
        ]
    return Response.json(status, {"error": error})


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"


def _oauth_error(status: int, error: str, description: str, style: ErrorStyle = "legacy") -> Response:
    if style == "html":
        return Response(status, f"<html><body>{status} {_phrase(status)}</body></html>".encode(), {})
    return Response.json(status, {"error": error, "error_description": description})


def _now_rfc3339() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _b64url_json(part: str) -> Any:
    return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))


def _jwt_claims(assertion: str) -> dict[str, Any]:
    """The claims of a service-account assertion, after the checks Google makes short of the signature."""
    parts = assertion.split(".")
    if len(parts) != 3:
        raise _GrantError("invalid_grant", "Invalid JWT: not a compact JWS.")
    try:
        header, claims = _b64url_json(parts[0]), _b64url_json(parts[1])
    except (ValueError, binascii.Error) as exc:
        raise _GrantError("invalid_grant", "Invalid JWT: undecodable header or claims.") from exc
    if not isinstance(header, dict) or header.get("alg") != "RS256" or not isinstance(claims, dict):
        raise _GrantError("invalid_grant", "Invalid JWT: expected an RS256-signed claim set.")
    missing = [name for name in ("iss", "aud", "scope", "iat", "exp") if not claims.get(name)]
    if missing:
        raise _GrantError("invalid_grant", f"Invalid JWT: missing claims {', '.join(missing)}.")
    if float(claims["exp"]) <= time.time():
        raise _GrantError(
            "invalid_grant", "Invalid JWT: Token must be a short-lived token and in a reasonable timeframe."
        )
    return claims


def _parse_when(value: Mapping[str, Any], which: str) -> dt.date | dt.datetime:
    """A start/end object as a comparable value, or the 400 Google answers for it."""
    if not isinstance(value, Mapping):
        raise _ApiError(400, "required", f"Missing {which} time.")
    time_zone, zone = value.get("timeZone"), None
    if time_zone is not None:
        try:
            zone = zoneinfo.ZoneInfo(str(time_zone))
        except (zoneinfo.ZoneInfoNotFoundError, ValueError) as exc:
            raise _ApiError(400, "invalid", f"Invalid time zone definition for {which} time.") from exc
    if value.get("dateTime"):
        try:
            moment = dt.datetime.fromisoformat(str(value["dateTime"]))
        except ValueError as exc:
            raise _ApiError(400, "invalid", f"Invalid {which} time.") from exc
        if moment.tzinfo is None:
            if zone is None:
                raise _ApiError(400, "required", f"Missing time zone definition for {which} time.")
            moment = moment.replace(tzinfo=zone)
        return moment
    if value.get("date"):
        try:
            return dt.date.fromisoformat(str(value["date"]))
        except ValueError as exc:
            raise _ApiError(400, "invalid", f"Invalid {which} time.") from exc
    raise _ApiError(400, "required", f"Missing {which} time.")


def _check_event(body: Mapping[str, Any]) -> None:
    """Reject what Calendar v3 rejects on insert/update: bad times, bad status, attendees without email."""
    start = _parse_when(body.get("start") or {}, "start")
    end = _parse_when(body.get("end") or {}, "end")
    if isinstance(start, dt.datetime) != isinstance(end, dt.datetime):
        raise _ApiError(400, "invalid", "Start and end times must either both be date or both be dateTime.")
    if end < start:
        raise _ApiError(400, "timeRangeEmpty")
    if body.get("status", "confirmed") not in _STATUSES:
        raise _ApiError(400, "invalid", "Invalid value for: status")
    for attendee in body.get("attendees") or ():
        if not isinstance(attendee, Mapping) or not attendee.get("email"):
            raise _ApiError(400, "required", "Missing attendee email.")


def _merge_patch(current: dict[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(current)
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = _merge_patch(merged[key], value)
        else:
            merged[key] = value
    return merged


@dataclass
class _AccessToken:
    expires_at: float
    source: str


class GoogleCalendarEmulator(EmulatorApp):
    """Calendar v3 events + OAuth token endpoint in memory, safe for concurrent clients."""

    rule_type = GoogleFaultRule

    def __init__(self, *, token_lifetime: float = DEFAULT_TOKEN_LIFETIME, seed: int | None = None) -> None:
        super().__init__()
        self.rules = FaultRules(self.rule_type, seed=seed)
        self._default_lifetime = token_lifetime
        self._lock = threading.Lock()
        self._etags: Iterator[int] = itertools.count(3181161784712000, 1000)
        self._calendars: dict[str, dict[str, dict[str, Any]]] = {}
        self._tokens: dict[str, _AccessToken] = {}
        self._revoked: set[str] = set()
        self.token_lifetime = token_lifetime

    # --- EmulatorApp ---------------------------------------------------------------------------

    def reset(self) -> None:
        """Forget events, tokens, revocations and the token lifetime set over the control API."""
        with self._lock:
            self._calendars.clear()
            self._tokens.clear()
            self._revoked.clear()
            self.token_lifetime = self._default_lifetime

    def handle(self, request: Request) -> Response:
        """Serve the token endpoint and the events API."""
        if request.raw_path == TOKEN_PATH and request.method == "POST":
            return self._token(request)
        if not request.raw_path.startswith(API_PREFIX):
            return google_error(404)
        try:
            with self._lock:
                self._authorize(request)
                response = self._api(request)
        except _ApiError as exc:
            response = google_error(exc.status, exc.reason, exc.message)
        if "sendUpdates" in request.query:
            response.log["send_updates"] = request.query["sendUpdates"][-1]
        if request.header("if-match"):
            response.log["if_match"] = request.header("if-match")
        return response

    def render_fault(self, rule: FaultRule, request: Request) -> Response:
        """A Google-shaped error (OAuth-shaped on the token endpoint) with an optional Retry-After."""
        status = rule.status or 500
        style: ErrorStyle = rule.style if isinstance(rule, GoogleFaultRule) else "legacy"
        if request.raw_path == TOKEN_PATH:
            error = rule.reason or ("server_error" if status >= 500 else "invalid_request")
            response = _oauth_error(status, error, rule.message or _phrase(status), style)
        else:
            response = google_error(status, rule.reason, rule.message, style)
        if rule.retry_after is not None:
            response.headers["Retry-After"] = f"{rule.retry_after:g}"
        return response

    def control(self, request: Request) -> Response | None:
        """Revocation, token expiry and token lifetime (see the module docstring)."""
        route = (request.method, request.raw_path.removeprefix("/_emulator/").rstrip("/"))
        try:
            body = request.json() or {}
        except ValueError:
            return Response.json(400, {"error": "body must be JSON"})
        if not isinstance(body, dict):
            return Response.json(400, {"error": "body must be a JSON object"})
        if route == ("POST", "revoke"):
            return self._revoke(body)
        if route == ("POST", "tokens/expire"):
            with self._lock:
                expired = len(self._tokens)
                self._tokens.clear()
            return Response.json(200, {"expired": expired})
        if route == ("POST", "config"):
            lifetime = body.get("token_lifetime")
            if not isinstance(lifetime, int | float) or isinstance(lifetime, bool) or lifetime < 0:
                return Response.json(400, {"error": "token_lifetime must be a number of seconds >= 0"})
            with self._lock:
                self.token_lifetime = lifetime
        if route in {("POST", "config"), ("GET", "config")}:
            return Response.json(200, {"token_lifetime": self.token_lifetime})
        return None

    # --- OAuth -----------------------------------------------------------------------------------

    def _revoke(self, body: Mapping[str, Any]) -> Response:
        source = body.get("refresh_token") or body.get("client_email")
        if not isinstance(source, str):
            return Response.json(400, {"error": "give refresh_token or client_email"})
        with self._lock:
            self._revoked.add(source)
            for token in [t for t, record in self._tokens.items() if record.source == source]:
                del self._tokens[token]
        return Response.json(200, {"revoked": True})

    def _grant(self, form: Mapping[str, str]) -> tuple[str, str | None, str]:
        """Check a token request; returns (who it is for, delegated subject, scope)."""
        grant = form.get("grant_type", "")
        if grant == "refresh_token":
            if not form.get("refresh_token"):
                raise _GrantError("invalid_request", "Missing required parameter: refresh_token")
            return form["refresh_token"], None, form.get("scope", "")
        if grant == JWT_BEARER:
            claims = _jwt_claims(form.get("assertion", ""))
            subject = claims.get("sub")
            return str(claims["iss"]), str(subject) if subject else None, str(claims["scope"])
        raise _GrantError("unsupported_grant_type", f"Invalid grant_type: {grant}")

    def _token(self, request: Request) -> Response:
        form = {key: values[-1] for key, values in parse_qs(request.body.decode(errors="replace")).items()}
        grant = "jwt-bearer" if form.get("grant_type") == JWT_BEARER else form.get("grant_type", "")
        try:
            source, subject, scope = self._grant(form)
            with self._lock:
                if source in self._revoked:
                    raise _GrantError("invalid_grant", "Token has been expired or revoked.")
                access_token = "ya29.emu-" + secrets.token_urlsafe(24)
                self._tokens[access_token] = _AccessToken(time.monotonic() + self.token_lifetime, source)
                lifetime = self.token_lifetime
        except _GrantError as exc:
            response = _oauth_error(400, exc.error, exc.description)
            response.log = {"grant": grant, "error": exc.error}
            return response
        payload = {"access_token": access_token, "expires_in": int(lifetime), "token_type": "Bearer", "scope": scope}
        response = Response.json(200, payload)
        response.log = {"grant": grant, "subject": subject, "scope": scope}
        return response

    def _authorize(self, request: Request) -> None:
        scheme, _, token = (request.header("authorization") or "").partition(" ")
        record = self._tokens.get(token) if scheme.lower() == "bearer" else None
        if record is None or time.monotonic() >= record.expires_at:
            raise _ApiError(401, "authError")

    # --- events API (called with the lock held) ----------------------------------------------

    def _api(self, request: Request) -> Response:
        # Split the raw path before decoding: calendar ids hold '@' and may hold an encoded '/'.
        segments = [unquote(s) for s in request.raw_path[len(API_PREFIX) :].split("/")]
        method, query = request.method, request.query
        override = request.header("x-http-method-override")
        if override and method == "POST":
            method = override.upper()
            if method == "GET":
                query = {**query, **parse_qs(request.body.decode(), keep_blank_values=True)}
        if len(segments) not in (3, 4) or segments[0] != "calendars" or segments[2] != "events":
            raise _ApiError(404)
        events = self._calendars.setdefault(segments[1], {})
        if len(segments) == 3:
            if method == "GET":
                return self._list(segments[1], events, query)
            if method == "POST":
                return self._insert(segments[1], events, request.json() or {})
            raise _ApiError(405, "httpMethodNotAllowed", "Method Not Allowed")
        event = events.get(segments[3])
        if event is None:
            raise _ApiError(404)
        if method == "GET":
            return self._get(event, request)
        if method == "PUT":
            return self._write(segments[1], event, request, request.json() or {})
        if method == "PATCH":
            return self._write(segments[1], event, request, _merge_patch(self._writable(event), request.json() or {}))
        if method == "DELETE":
            return self._delete(event, request)
        raise _ApiError(405, "httpMethodNotAllowed", "Method Not Allowed")

    def _next_etag(self) -> str:
        return f'"{next(self._etags)}"'

    @staticmethod
    def _writable(event: Mapping[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in event.items() if k not in _READ_ONLY and k != "sequence"}

    def _store(
        self, calendar_id: str, event_id: str, body: Mapping[str, Any], previous: Mapping[str, Any]
    ) -> dict[str, Any]:
        _check_event(body)
        now = _now_rfc3339()
        old_attendees = {a["email"]: a for a in previous.get("attendees") or ()}
        event: dict[str, Any] = {
            "kind": "calendar#event",
            "etag": self._next_etag(),
            "id": event_id,
            "status": "confirmed",
            "htmlLink": f"https://www.google.com/calendar/event?eid={event_id}",
            "created": previous.get("created", now),
            "updated": now,
            "creator": {"email": calendar_id, "self": True},
            "organizer": {"email": calendar_id, "self": True},
            "reminders": {"useDefault": True},
            "eventType": "default",
            **{k: v for k, v in body.items() if k not in _READ_ONLY and k != "sequence"},
            "iCalUID": f"{event_id}@google.com",
            "sequence": previous["sequence"] + 1 if previous else 0,
        }
        if body.get("attendees"):
            event["attendees"] = [
                {"responseStatus": old_attendees.get(a["email"], {}).get("responseStatus", "needsAction"), **a}
                for a in body["attendees"]
            ]
        self._calendars[calendar_id][event_id] = event
        return event

    def _insert(self, calendar_id: str, events: dict[str, dict[str, Any]], body: Mapping[str, Any]) -> Response:
        event_id = body.get("id")
        if event_id is None:
            event_id = base64.b32hexencode(secrets.token_bytes(16)).decode().rstrip("=").lower()
        elif not isinstance(event_id, str) or not _EVENT_ID.fullmatch(event_id):
            raise _ApiError(400, "invalid", "Invalid resource id value.")
        elif event_id in events:
            raise _ApiError(409, "duplicate")
        return Response.json(200, self._store(calendar_id, event_id, body, {}))

    @staticmethod
    def _check_if_match(event: Mapping[str, Any], request: Request) -> None:
        expected = request.header("if-match")
        if expected is not None and expected != "*" and expected != event["etag"]:
            raise _ApiError(412, "conditionNotMet")

    @staticmethod
    def _get(event: Mapping[str, Any], request: Request) -> Response:
        if request.header("if-none-match") == event["etag"]:
            return Response(304)
        return Response.json(200, event)

    def _write(self, calendar_id: str, event: Mapping[str, Any], request: Request, body: Mapping[str, Any]) -> Response:
        self._check_if_match(event, request)
        return Response.json(200, self._store(calendar_id, event["id"], body, event))

    def _delete(self, event: dict[str, Any], request: Request) -> Response:
        if event["status"] == "cancelled":
            raise _ApiError(410, "deleted")
        self._check_if_match(event, request)
        event.update(status="cancelled", etag=self._next_etag(), updated=_now_rfc3339())
        return Response(204)

    def _list(
        self, calendar_id: str, events: Mapping[str, Mapping[str, Any]], query: Mapping[str, list[str]]
    ) -> Response:
        show_deleted = (query.get("showDeleted") or ["false"])[-1].lower() == "true"
        constraints = [c.partition("=") for c in query.get("privateExtendedProperty", [])]
        try:
            size = min(int((query.get("maxResults") or [str(DEFAULT_PAGE_SIZE)])[-1]), MAX_PAGE_SIZE)
            offset = int((query.get("pageToken") or ["0"])[-1])
        except ValueError as exc:
            raise _ApiError(400, "invalid", "Invalid value for: maxResults or pageToken") from exc
        if size < 1 or offset < 0:
            raise _ApiError(400, "invalid", "Invalid value for: maxResults or pageToken")
        matching = [
            event
            for event in events.values()
            if (show_deleted or event["status"] != "cancelled")
            and all(
                (event.get("extendedProperties") or {}).get("private", {}).get(key) == value
                for key, _, value in constraints
            )
        ]
        page: dict[str, Any] = {
            "kind": "calendar#events",
            "etag": self._next_etag(),
            "summary": calendar_id,
            "updated": _now_rfc3339(),
            "timeZone": "UTC",
            "accessRole": "owner",
            "defaultReminders": [],
            "items": matching[offset : offset + size],
        }
        if offset + size < len(matching):
            page["nextPageToken"] = str(offset + size)
        return Response.json(200, page)


def create_app(*, token_lifetime: float = DEFAULT_TOKEN_LIFETIME, seed: int | None = None) -> GoogleCalendarEmulator:
    """The Google emulator app (``calsync emulator google`` and the test fixtures); ``seed`` fixes fault coin tosses."""
    return GoogleCalendarEmulator(token_lifetime=token_lifetime, seed=seed)

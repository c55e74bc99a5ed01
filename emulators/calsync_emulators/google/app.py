"""The Google emulator app: routes a request to the token endpoint, the events API, channels or the control routes."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, unquote

from pydantic import Field

from calsync_emulators.faults import FaultRule, FaultRules
from calsync_emulators.google.behaviour import GoogleBehaviour
from calsync_emulators.google.channels import Channels
from calsync_emulators.google.control_routes import control, user_change
from calsync_emulators.google.errors import ApiError, ErrorStyle, google_error, oauth_error, phrase
from calsync_emulators.google.events import EventStore
from calsync_emulators.google.listing import Listing, SyncTokens
from calsync_emulators.google.oauth import DEFAULT_TOKEN_LIFETIME, TOKEN_PATH, TokenIssuer
from calsync_emulators.google.partial import partial
from calsync_emulators.server import EmulatorApp, Request, Response

API_PREFIX = "/calendar/v3/"
_NOT_ALLOWED = ApiError(405, "httpMethodNotAllowed", "Method Not Allowed")


class GoogleFaultRule(FaultRule):
    """A fault rule that can also choose which of Google's error-body shapes to answer with, and match the query."""

    style: ErrorStyle | None = None
    query: str | None = Field(default=None, description="regex searched in the decoded query, name=value&...")

    def matches(self, method: str, path: str, request: Any = None) -> bool:
        """The shared matchers, and ``query`` (e.g. ``pageToken=`` for a listing's later pages)."""
        if not super().matches(method, path, request):
            return False
        if self.query is None:
            return True
        pairs = request.query.items() if isinstance(request, Request) else ()
        return (
            re.search(self.query, "&".join(f"{name}={value}" for name, values in pairs for value in values)) is not None
        )


@dataclass(frozen=True)
class _Call:
    """An API request reduced to what routing needs: the method after overrides, decoded segments, the query."""

    method: str
    segments: list[str]
    query: Mapping[str, list[str]]
    request: Request

    @classmethod
    def of(cls, request: Request) -> _Call:
        # Split the raw path before decoding: calendar ids hold '@' and may hold an encoded '/'.
        segments = [unquote(s) for s in request.raw_path[len(API_PREFIX) :].split("/")]
        method, query = request.method, request.query
        override = request.header("x-http-method-override")
        if override and method == "POST":
            method = override.upper()
            if method == "GET":
                query = {**query, **parse_qs(request.body.decode(), keep_blank_values=True)}
        return cls(method, segments, query, request)

    def body(self) -> Any:
        """The JSON body (400 ``parseError`` when it is not JSON)."""
        try:
            return self.request.json() or {}
        except ValueError as exc:
            raise ApiError(400, "parseError", "Parse Error") from exc

    def param(self, name: str) -> str | None:
        """The last value of a query parameter."""
        values = self.query.get(name)
        return values[-1] if values else None


class GoogleCalendarEmulator(EmulatorApp):
    """Calendar v3 events, channels and the OAuth token endpoint in memory, safe for concurrent clients."""

    rule_type = GoogleFaultRule

    def __init__(self, *, token_lifetime: float = DEFAULT_TOKEN_LIFETIME, seed: int | None = None) -> None:
        super().__init__()
        self.rules = FaultRules(self.rule_type, seed=seed)
        self._lock = threading.Lock()
        self.behaviour = GoogleBehaviour()
        self.channels = Channels()
        self.events = EventStore(self.behaviour, self.channels.changed)
        self.sync_tokens = SyncTokens()
        self.tokens = TokenIssuer(self._lock, token_lifetime)

    @property
    def token_lifetime(self) -> float:
        """Lifetime of the tokens issued from now on, in seconds."""
        return self.tokens.token_lifetime

    def reset(self) -> None:
        """Forget events, sync tokens, channels, tokens, revocations and every setting made over the control API."""
        with self._lock:
            self.events.reset()
            self.sync_tokens.reset()
            self.channels.reset()
            self.tokens.reset()
            self.configure(GoogleBehaviour().model_dump())

    def configure(self, changes: Mapping[str, Any]) -> None:
        """Change behaviour switches in place (the store and listing hold this object); all or none."""
        checked = GoogleBehaviour.model_validate({**self.behaviour.model_dump(), **changes})
        for name in type(checked).model_fields:
            setattr(self.behaviour, name, getattr(checked, name))

    def _configure_locked(self, changes: Mapping[str, Any]) -> None:
        with self._lock:
            self.configure(changes)

    def handle(self, request: Request) -> Response:
        """Serve the token endpoint and the events API."""
        if request.raw_path == TOKEN_PATH and request.method == "POST":
            return self.tokens.token(request)
        if not request.raw_path.startswith(API_PREFIX):
            return google_error(404, style=self.behaviour.error_style)
        call = _Call.of(request)
        try:
            with self._lock:
                self.tokens.authorize(request)
                self.events.sweep(time.time())
                response = self._route(call)
        except ApiError as exc:
            response = google_error(exc.status, exc.reason, exc.message, self.behaviour.error_style, exc.location)
        if "sendUpdates" in request.query:
            response.log["send_updates"] = request.query["sendUpdates"][-1]
        if request.header("if-match"):
            response.log["if_match"] = request.header("if-match")
        return response

    def _route(self, call: _Call) -> Response:
        segments, method = call.segments, call.method
        if segments == ["channels", "stop"] and method == "POST":
            self.channels.stop(call.body())
            return Response(204)
        if len(segments) not in (3, 4) or segments[0] != "calendars" or segments[2] != "events":
            raise ApiError(404)
        calendar_id = segments[1]
        if len(segments) == 3:
            if method == "GET":
                page = Listing(self.events, self.sync_tokens, self.behaviour).answer(calendar_id, call.query)
                return Response.json(200, partial(page, call.param("fields"), "Events"))
            if method == "POST":
                return self.events.insert(calendar_id, call.body(), call.query)
            raise _NOT_ALLOWED
        event_id = segments[3]
        if event_id == "watch" and method == "POST":
            return Response.json(200, self.channels.watch(calendar_id, call.body(), strict=self.behaviour.strict))
        if_match = call.request.header("if-match")
        if method == "GET":
            return self.events.get(calendar_id, event_id, call.request.header("if-none-match"), call.param("timeZone"))
        if method in ("PUT", "PATCH"):
            return self.events.write(calendar_id, event_id, call.body(), call.query, if_match, patch=method == "PATCH")
        if method == "DELETE":
            return self.events.delete(calendar_id, event_id, if_match)
        raise _NOT_ALLOWED

    def render_fault(self, rule: FaultRule, request: Request) -> Response:
        """A Google-shaped error (OAuth-shaped on the token endpoint) with an optional Retry-After."""
        status = rule.status or 500
        style = (rule.style if isinstance(rule, GoogleFaultRule) else None) or self.behaviour.error_style
        if request.raw_path == TOKEN_PATH:
            error = rule.reason or ("server_error" if status >= 500 else "invalid_request")
            response = oauth_error(status, error, rule.message or phrase(status), style)
        else:
            response = google_error(status, rule.reason, rule.message, style)
        if rule.retry_after is not None:
            response.headers["Retry-After"] = f"{rule.retry_after:g}"
        return response

    def concurrency_key(self, request: Request) -> str | None:
        """API requests are counted in flight per calendar (``/calendar/v3/calendars/<id>/...``)."""
        if not request.raw_path.startswith(API_PREFIX + "calendars/"):
            return None
        return unquote(request.raw_path[len(API_PREFIX + "calendars/") :].split("/", 1)[0])

    def control(self, request: Request) -> Response | None:
        """Revocation, token expiry, behaviour switches, push deliveries and the user's edits (package docstring)."""
        if (request.method, request.raw_path.rstrip("/")) == ("GET", "/_emulator/notifications"):
            return Response.json(200, self.channels.deliveries())
        if (answer := user_change(request, self.events, self._lock)) is not None:
            return answer
        return control(request, self.tokens, self.behaviour, self._configure_locked)


def create_app(*, token_lifetime: float = DEFAULT_TOKEN_LIFETIME, seed: int | None = None) -> GoogleCalendarEmulator:
    """The Google emulator app (``calsync emulator google`` and the test fixtures); ``seed`` fixes fault coin tosses."""
    return GoogleCalendarEmulator(token_lifetime=token_lifetime, seed=seed)

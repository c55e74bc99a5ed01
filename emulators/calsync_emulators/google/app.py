"""The Google emulator app: routes a request to the token endpoint, the events API or the control routes."""

from __future__ import annotations

import threading

from calsync_emulators.faults import FaultRule, FaultRules
from calsync_emulators.google.control_routes import control
from calsync_emulators.google.errors import ApiError, ErrorStyle, google_error, oauth_error, phrase
from calsync_emulators.google.events import API_PREFIX, EventStore
from calsync_emulators.google.oauth import DEFAULT_TOKEN_LIFETIME, TOKEN_PATH, TokenIssuer
from calsync_emulators.server import EmulatorApp, Request, Response


class GoogleFaultRule(FaultRule):
    """A fault rule that can also choose which of Google's error-body shapes to answer with."""

    style: ErrorStyle = "legacy"


class GoogleCalendarEmulator(EmulatorApp):
    """Calendar v3 events + OAuth token endpoint in memory, safe for concurrent clients."""

    rule_type = GoogleFaultRule

    def __init__(self, *, token_lifetime: float = DEFAULT_TOKEN_LIFETIME, seed: int | None = None) -> None:
        super().__init__()
        self.rules = FaultRules(self.rule_type, seed=seed)
        self._lock = threading.Lock()
        self.events = EventStore()
        self.tokens = TokenIssuer(self._lock, token_lifetime)

    @property
    def token_lifetime(self) -> float:
        """Lifetime of the tokens issued from now on, in seconds."""
        return self.tokens.token_lifetime

    def reset(self) -> None:
        """Forget events, tokens, revocations and the token lifetime set over the control API."""
        with self._lock:
            self.events.reset()
            self.tokens.reset()

    def handle(self, request: Request) -> Response:
        """Serve the token endpoint and the events API."""
        if request.raw_path == TOKEN_PATH and request.method == "POST":
            return self.tokens.token(request)
        if not request.raw_path.startswith(API_PREFIX):
            return google_error(404)
        try:
            with self._lock:
                self.tokens.authorize(request)
                response = self.events.serve(request)
        except ApiError as exc:
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
            response = oauth_error(status, error, rule.message or phrase(status), style)
        else:
            response = google_error(status, rule.reason, rule.message, style)
        if rule.retry_after is not None:
            response.headers["Retry-After"] = f"{rule.retry_after:g}"
        return response

    def control(self, request: Request) -> Response | None:
        """Revocation, token expiry and token lifetime (see the package docstring)."""
        return control(request, self.tokens)


def create_app(*, token_lifetime: float = DEFAULT_TOKEN_LIFETIME, seed: int | None = None) -> GoogleCalendarEmulator:
    """The Google emulator app (``calsync emulator google`` and the test fixtures); ``seed`` fixes fault coin tosses."""
    return GoogleCalendarEmulator(token_lifetime=token_lifetime, seed=seed)

"""An Entra ID (Azure AD v2.0) token endpoint for the Graph and EWS front ends: what msal sends and expects.

- ``GET /{tenant}/v2.0/.well-known/openid-configuration``: the discovery document msal reads first
  (``token_endpoint``, ``authorization_endpoint``, ``issuer``), always with https URLs (msal refuses others).
- ``POST /{tenant}/oauth2/v2.0/token``: ``client_credentials`` (``client_secret`` in the form or HTTP Basic,
  or a ``client_assertion`` JWT whose ``iss`` is the client; the signature is not checked) and
  ``refresh_token`` (a token issued over the control API; each use answers a *rotated* refresh token, the old
  one staying valid as in Entra). Errors are Entra's shape: ``{"error", "error_description": "AADSTSnnn: …\\r\\n
  Trace ID: …", "error_codes": [nnn], "timestamp", "trace_id", "correlation_id", "error_uri"}``.
- Codes (as Entra documents them): unknown app 400 ``unauthorized_client`` AADSTS700016; wrong secret 401
  ``invalid_client`` AADSTS7000215; expired secret (control API) 401 ``invalid_client`` AADSTS7000222; unknown
  tenant 400 ``invalid_request`` AADSTS90002; revoked refresh token 400 ``invalid_grant`` with the code the
  revocation chose (AADSTS50173 by default, 700082 inactivity, 70043 sign-in frequency); unknown refresh
  token 400 ``invalid_grant`` AADSTS9002313.
- Access tokens live ``token_lifetime`` seconds (3599 by default, settable); expiring them all, or revoking a
  user's refresh tokens, makes the access tokens issued from them fail with 401 at once.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import json
import secrets
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from calsync_emulators.ews.directory import Access
from calsync_emulators.server import Request, Response

DEFAULT_TOKEN_LIFETIME = 3599
_MESSAGES = {
    700016: "Application with identifier '{client}' was not found in the directory '{tenant}'.",
    7000215: "Invalid client secret provided. Ensure the secret being sent in the request is the client secret "
    "value, not the client secret ID, for a secret added to app '{client}'.",
    7000222: "The provided client secret keys for app '{client}' are expired.",
    7000218: "The request body must contain the following parameter: 'client_assertion' or 'client_secret'.",
    90002: "Tenant '{tenant}' not found.",
    50173: "The provided grant has expired due to it being revoked, a fresh auth token is needed.",
    700082: "The refresh token has expired due to inactivity. The token was issued on {now} and was inactive "
    "for 90.00:00:00.",
    70043: "The refresh token has expired or is invalid due to sign-in frequency checks by conditional access.",
    9002313: "Invalid request. Request is malformed or invalid.",
    70000: "The request was denied because one or more scopes requested are unauthorized or expired.",
    900144: "The request body must contain the following parameter: 'grant_type'.",
}


@dataclass
class Issued:
    """An access token: for an app (``user`` None) or for a user through a refresh-token family."""

    client_id: str
    user: str | None
    family: str | None
    expires_at: float


@dataclass
class _Refresh:
    client_id: str
    user: str
    family: str


class EntraError(Exception):
    """A token request Entra refuses."""

    def __init__(self, status: int, error: str, code: int, **fmt: str) -> None:
        now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%SZ")
        super().__init__(_MESSAGES[code].format(now=now, **fmt))
        self.status, self.error, self.code = status, error, code

    def response(self) -> Response:
        """Entra's error body."""
        trace, correlation = str(uuid.uuid4()), str(uuid.uuid4())
        stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M:%SZ")
        description = (
            f"AADSTS{self.code}: {self}\r\nTrace ID: {trace}\r\nCorrelation ID: {correlation}\r\nTimestamp: {stamp}"
        )
        answer = Response.json(
            self.status,
            {
                "error": self.error,
                "error_description": description,
                "error_codes": [self.code],
                "timestamp": stamp,
                "trace_id": trace,
                "correlation_id": correlation,
                "error_uri": f"https://login.microsoftonline.com/error?code={self.code}",
            },
        )
        answer.log = {"operation": "token", "outcome": f"AADSTS{self.code}"}
        return answer


def _assertion_issuer(assertion: str) -> str | None:
    try:
        payload = assertion.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (IndexError, ValueError, binascii.Error):
        return None
    return str(claims.get("iss")) if isinstance(claims, dict) and claims.get("iss") else None


class Entra:
    """Issues and checks tokens for the apps of the EWS directory; shares the app's lock."""

    def __init__(self, access: Access, lock: threading.RLock) -> None:
        self._access = access
        self._lock = lock
        self.reset()

    def reset(self) -> None:
        """Forget tokens, refresh tokens, revocations, expired secrets and the lifetime set."""
        with self._lock:
            self.token_lifetime: float = DEFAULT_TOKEN_LIFETIME
            self._tokens: dict[str, Issued] = {}
            self._refresh: dict[str, _Refresh] = {}
            self._revoked: dict[str, int] = {}
            self._expired_secrets: set[str] = set()

    # --- control -----------------------------------------------------------------------------------

    def issue_refresh_token(self, client_id: str, user: str) -> str:
        """A refresh token for ``user`` consented to ``client_id`` (what an interactive sign-in would give)."""
        token = "rt-" + secrets.token_urlsafe(24)
        with self._lock:
            self._refresh[token] = _Refresh(client_id, user.lower(), secrets.token_hex(8))
        return token

    def revoke(self, *, user: str | None = None, refresh_token: str | None = None, code: int = 50173) -> int:
        """Revoke the refresh-token families of a user (or of one token); returns how many families."""
        with self._lock:
            families = {
                r.family
                for t, r in self._refresh.items()
                if (user is not None and r.user == user.lower()) or t == refresh_token
            }
            for family in families:
                self._revoked[family] = code
        return len(families)

    def expire_secret(self, client_id: str) -> None:
        """The app's client secret has expired: grants with it answer AADSTS7000222."""
        with self._lock:
            self._expired_secrets.add(client_id)

    def expire_all(self) -> int:
        """Every access token issued so far expires now; returns how many."""
        with self._lock:
            for issued in self._tokens.values():
                issued.expires_at = 0
            return len(self._tokens)

    # --- protocol ----------------------------------------------------------------------------------

    def lookup(self, token: str) -> Issued | None:
        """The live access token, or None (unknown, expired, or its refresh family revoked)."""
        with self._lock:
            issued = self._tokens.get(token)
            if issued is None or issued.expires_at <= time.monotonic():
                return None
            if issued.family is not None and issued.family in self._revoked:
                return None
            return issued

    def app_of(self, token: str) -> str | None:
        """The app an app-only token was issued to (EWS accepts these for impersonation)."""
        issued = self.lookup(token)
        return issued.client_id if issued is not None and issued.user is None else None

    def discovery(self, request: Request, tenant: str) -> Response:
        """The OpenID configuration msal reads before its first token request."""
        base = f"https://{request.header('Host') or '127.0.0.1'}/{tenant}"
        answer = Response.json(
            200,
            {
                "token_endpoint": f"{base}/oauth2/v2.0/token",
                "authorization_endpoint": f"{base}/oauth2/v2.0/authorize",
                "issuer": f"{base}/v2.0",
                "token_endpoint_auth_methods_supported": ["client_secret_post", "private_key_jwt"],
            },
        )
        answer.log = {"operation": "discovery"}
        return answer

    def token(self, request: Request, tenant: str) -> Response:
        """Serve one token request."""
        form = {k: v[0] for k, v in parse_qs(request.body.decode(errors="replace")).items()}
        client_id, secret = form.get("client_id", ""), form.get("client_secret")
        basic = request.header("Authorization") or ""
        if basic.lower().startswith("basic "):
            try:
                client_id, _, secret = base64.b64decode(basic[6:]).decode().partition(":")
            except (binascii.Error, UnicodeDecodeError):
                secret = None
        grant = form.get("grant_type", "")
        log: dict[str, Any] = {"operation": "token", "client_id": client_id, "grant": grant}
        try:
            with self._lock:
                payload = self._grant(form, tenant, client_id, secret, grant, log)
        except EntraError as exc:
            answer = exc.response()
            answer.log = {**log, **answer.log}
            return answer
        answer = Response.json(200, payload)
        answer.log = {**log, "outcome": "issued"}
        return answer

    def _grant(
        self, form: dict[str, str], tenant: str, client_id: str, secret: str | None, grant: str, log: dict[str, Any]
    ) -> dict[str, Any]:
        client = self._access.directory.clients.get(client_id)
        if client is None:
            raise EntraError(400, "unauthorized_client", 700016, client=client_id, tenant=tenant)
        if client.tenant is not None and client.tenant != tenant:
            raise EntraError(400, "invalid_request", 90002, tenant=tenant)
        assertion = form.get("client_assertion")
        if assertion is not None:
            if _assertion_issuer(assertion) != client_id:
                raise EntraError(401, "invalid_client", 7000215, client=client_id)
        elif secret is not None:
            if not secrets.compare_digest(client.secret, secret):
                raise EntraError(401, "invalid_client", 7000215, client=client_id)
            if client_id in self._expired_secrets:
                raise EntraError(401, "invalid_client", 7000222, client=client_id)
        elif grant == "client_credentials":
            raise EntraError(400, "invalid_client", 7000218)
        lifetime = self.token_lifetime
        body: dict[str, Any] = {"token_type": "Bearer", "scope": form.get("scope", ""),
                                "expires_in": int(lifetime), "ext_expires_in": int(lifetime)}  # fmt: skip
        access = "at-" + secrets.token_urlsafe(24)
        if grant == "client_credentials":
            self._tokens[access] = Issued(client_id, None, None, time.monotonic() + lifetime)
        elif grant == "refresh_token":
            presented = form.get("refresh_token", "")
            refresh = self._refresh.get(presented)
            if refresh is None or refresh.client_id != client_id:
                raise EntraError(400, "invalid_grant", 9002313)
            if refresh.family in self._revoked:
                raise EntraError(400, "invalid_grant", self._revoked[refresh.family])
            rotated = "rt-" + secrets.token_urlsafe(24)
            self._refresh[rotated] = _Refresh(client_id, refresh.user, refresh.family)
            self._tokens[access] = Issued(client_id, refresh.user, refresh.family, time.monotonic() + lifetime)
            body["refresh_token"] = rotated
            log["subject"] = refresh.user
        else:
            raise EntraError(400, "invalid_request", 900144)
        body["access_token"] = access
        return body

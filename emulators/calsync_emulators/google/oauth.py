"""The emulator's OAuth token endpoint and the access tokens it issued.

What a grant must contain is documented by Google (refresh-token and JWT-bearer grants); which checks the
emulator makes short of the signature, and the token lifetime, are our choices (docs/notes/emulators.md).
"""

from __future__ import annotations

import base64
import binascii
import json
import secrets
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from calsync_emulators.google.errors import ApiError, GrantError, oauth_error
from calsync_emulators.server import Request, Response

TOKEN_PATH = "/token"
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
DEFAULT_TOKEN_LIFETIME = 3599


def _b64url_json(part: str) -> Any:
    return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))


def jwt_claims(assertion: str) -> dict[str, Any]:
    """The claims of a service-account assertion, after the checks Google makes short of the signature."""
    parts = assertion.split(".")
    if len(parts) != 3:
        raise GrantError("invalid_grant", "Invalid JWT: not a compact JWS.")
    try:
        header, claims = _b64url_json(parts[0]), _b64url_json(parts[1])
    except (ValueError, binascii.Error) as exc:
        raise GrantError("invalid_grant", "Invalid JWT: undecodable header or claims.") from exc
    if not isinstance(header, dict) or header.get("alg") != "RS256" or not isinstance(claims, dict):
        raise GrantError("invalid_grant", "Invalid JWT: expected an RS256-signed claim set.")
    missing = [name for name in ("iss", "aud", "scope", "iat", "exp") if not claims.get(name)]
    if missing:
        raise GrantError("invalid_grant", f"Invalid JWT: missing claims {', '.join(missing)}.")
    if float(claims["exp"]) <= time.time():
        raise GrantError(
            "invalid_grant", "Invalid JWT: Token must be a short-lived token and in a reasonable timeframe."
        )
    return claims


def _grant(form: Mapping[str, str]) -> tuple[str, str | None, str]:
    """Check a token request; returns (who it is for, delegated subject, scope)."""
    grant = form.get("grant_type", "")
    if grant == "refresh_token":
        if not form.get("refresh_token"):
            raise GrantError("invalid_request", "Missing required parameter: refresh_token")
        return form["refresh_token"], None, form.get("scope", "")
    if grant == JWT_BEARER:
        claims = jwt_claims(form.get("assertion", ""))
        subject = claims.get("sub")
        return str(claims["iss"]), str(subject) if subject else None, str(claims["scope"])
    raise GrantError("unsupported_grant_type", f"Invalid grant_type: {grant}")


@dataclass
class _AccessToken:
    expires_at: float
    source: str


class TokenIssuer:
    """Issues, checks, revokes and expires access tokens; shares the app's lock (``authorize`` runs under it)."""

    def __init__(self, lock: threading.Lock, token_lifetime: float = DEFAULT_TOKEN_LIFETIME) -> None:
        self._lock = lock
        self._default_lifetime = token_lifetime
        self._tokens: dict[str, _AccessToken] = {}
        self._revoked: set[str] = set()
        self.token_lifetime = token_lifetime

    def reset(self) -> None:
        """Forget tokens, revocations and a lifetime set over the control API (call with the lock held)."""
        self._tokens.clear()
        self._revoked.clear()
        self.token_lifetime = self._default_lifetime

    def revoke(self, source: str) -> None:
        """Refuse later grants for a refresh token or client email, and drop the tokens issued for it."""
        with self._lock:
            self._revoked.add(source)
            for token in [t for t, record in self._tokens.items() if record.source == source]:
                del self._tokens[token]

    def expire_all(self) -> int:
        """Make every issued token expire now; returns how many there were."""
        with self._lock:
            expired = len(self._tokens)
            self._tokens.clear()
        return expired

    def set_lifetime(self, lifetime: float) -> None:
        """Lifetime of the tokens issued from now on."""
        with self._lock:
            self.token_lifetime = lifetime

    def token(self, request: Request) -> Response:
        """Serve ``POST /token`` (form-encoded refresh-token or JWT-bearer grant)."""
        form = {key: values[-1] for key, values in parse_qs(request.body.decode(errors="replace")).items()}
        grant = "jwt-bearer" if form.get("grant_type") == JWT_BEARER else form.get("grant_type", "")
        try:
            source, subject, scope = _grant(form)
            with self._lock:
                if source in self._revoked:
                    raise GrantError("invalid_grant", "Token has been expired or revoked.")
                access_token = "ya29.emu-" + secrets.token_urlsafe(24)
                self._tokens[access_token] = _AccessToken(time.monotonic() + self.token_lifetime, source)
                lifetime = self.token_lifetime
        except GrantError as exc:
            response = oauth_error(400, exc.error, exc.description)
            response.log = {"grant": grant, "error": exc.error}
            return response
        payload = {"access_token": access_token, "expires_in": int(lifetime), "token_type": "Bearer", "scope": scope}
        response = Response.json(200, payload)
        response.log = {"grant": grant, "subject": subject, "scope": scope}
        return response

    def authorize(self, request: Request) -> None:
        """Raise the 401 ``authError`` unless the request carries a live bearer token (call with the lock held)."""
        scheme, _, token = (request.header("authorization") or "").partition(" ")
        record = self._tokens.get(token) if scheme.lower() == "bearer" else None
        if record is None or time.monotonic() >= record.expires_at:
            raise ApiError(401, "authError")

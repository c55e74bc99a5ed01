"""The Google emulator's own control routes (revocation, token expiry, behaviour) under ``/_emulator/``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pydantic import ValidationError

from calsync_emulators.google.behaviour import GoogleBehaviour
from calsync_emulators.google.oauth import TokenIssuer
from calsync_emulators.server import CONTROL_PREFIX, Request, Response


def _revoke(tokens: TokenIssuer, body: Mapping[str, Any]) -> Response:
    source = body.get("refresh_token") or body.get("client_email")
    if not isinstance(source, str):
        return Response.json(400, {"error": "give refresh_token or client_email"})
    tokens.revoke(source)
    return Response.json(200, {"revoked": True})


def _configure(
    tokens: TokenIssuer, configure: Callable[[Mapping[str, Any]], None], body: Mapping[str, Any]
) -> Response | None:
    changes = dict(body)
    lifetime = changes.pop("token_lifetime", None)
    if lifetime is not None and (not isinstance(lifetime, int | float) or isinstance(lifetime, bool) or lifetime < 0):
        return Response.json(400, {"error": "token_lifetime must be a number of seconds >= 0"})
    try:
        configure(changes)
    except ValidationError as exc:
        return Response.json(400, {"error": str(exc)})
    if lifetime is not None:
        tokens.set_lifetime(lifetime)
    return None


def control(
    request: Request,
    tokens: TokenIssuer,
    behaviour: GoogleBehaviour,
    configure: Callable[[Mapping[str, Any]], None],
) -> Response | None:
    """Serve ``revoke``, ``tokens/expire`` and ``config``; None for any other route."""
    route = (request.method, request.raw_path.removeprefix(CONTROL_PREFIX).rstrip("/"))
    try:
        body = request.json() or {}
    except ValueError:
        return Response.json(400, {"error": "body must be JSON"})
    if not isinstance(body, dict):
        return Response.json(400, {"error": "body must be a JSON object"})
    if route == ("POST", "revoke"):
        return _revoke(tokens, body)
    if route == ("POST", "tokens/expire"):
        return Response.json(200, {"expired": tokens.expire_all()})
    if route == ("POST", "config") and (refused := _configure(tokens, configure, body)) is not None:
        return refused
    if route in {("POST", "config"), ("GET", "config")}:
        return Response.json(200, {"token_lifetime": tokens.token_lifetime, **behaviour.model_dump()})
    return None

"""The Google emulator's own control routes under ``/_emulator/``: revocation, token expiry, behaviour, user edits.

The user's edits (``PATCH`` / ``DELETE /_emulator/calendars/{calendarId}/events/{eventId}``) change an event as
its owner did in Calendar's UI, without a token, an ``If-Match`` or the request log: a new etag and ``updated``,
a new change position (the next ``syncToken`` list reports it; a deletion as the cancelled tombstone
``events.delete`` leaves) and a push to the watch channels. That the UI's edits and the API's leave the same
trace is inferred: Google documents one change history for a calendar, whoever changed it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import unquote

from pydantic import ValidationError

from calsync_emulators.google.behaviour import GoogleBehaviour
from calsync_emulators.google.errors import ApiError
from calsync_emulators.google.events import EventStore
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


def user_change(request: Request, events: EventStore, lock: threading.Lock) -> Response | None:
    """Serve the user's edit (``PATCH``, a JSON object merged like ``events.patch``) and delete of one event.

    Answers the event as it is now (200), or 204 for a delete; 404 for an unknown or (on edit) cancelled event,
    410 for a second delete, 400 for an edit Google would refuse. None for any other route.
    """
    segments = [unquote(s) for s in request.raw_path.removeprefix(CONTROL_PREFIX).rstrip("/").split("/")]
    if len(segments) != 4 or segments[0] != "calendars" or segments[2] != "events":
        return None
    calendar_id, event_id = segments[1], segments[3]
    if request.method not in ("PATCH", "DELETE"):
        return Response.json(405, {"error": "PATCH or DELETE"})
    try:
        changes = request.json() or {}
    except ValueError:
        return Response.json(400, {"error": "body must be JSON"})
    try:
        with lock:
            if request.method == "DELETE":
                events.user_delete(calendar_id, event_id)
                return Response(204)
            return Response.json(200, events.user_edit(calendar_id, event_id, changes))
    except ApiError as exc:
        return Response.json(exc.status, {"error": str(exc), "reason": exc.reason})


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

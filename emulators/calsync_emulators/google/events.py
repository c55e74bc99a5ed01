"""The Calendar v3 events collection: storage, the validation Google applies on writes, and the REST routes.

Documented by Google: the id alphabet and length, 409 ``duplicate`` (a cancelled event keeps its id),
DELETE answering 204 and a second one 410 ``deleted``, GET returning cancelled events while list hides
them unless ``showDeleted``, If-Match (412) / If-None-Match (304), the ``privateExtendedProperty`` filter
and the start/end and attendee requirements. Inferred or chosen (docs/notes/emulators.md): PUT/PATCH
restoring a cancelled event, ``sequence`` growing on every write, repeated filters all having to
match (Google's pages contradict each other), every calendar id existing.
"""

from __future__ import annotations

import base64
import datetime as dt
import itertools
import re
import secrets
import zoneinfo
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import parse_qs, unquote

from calsync_emulators.google.errors import ApiError
from calsync_emulators.server import Request, Response

API_PREFIX = "/calendar/v3/"
DEFAULT_PAGE_SIZE = 250
MAX_PAGE_SIZE = 2500

_EVENT_ID = re.compile(r"[a-v0-9]{5,1024}")
_READ_ONLY = frozenset({"kind", "etag", "id", "htmlLink", "created", "updated", "creator", "organizer", "iCalUID"})
_STATUSES = frozenset({"confirmed", "tentative", "cancelled"})


def now_rfc3339() -> str:
    """The current time as Google writes ``updated`` (UTC, milliseconds, ``Z``)."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _parse_when(value: Mapping[str, Any], which: str) -> dt.date | dt.datetime:
    """A start/end object as a comparable value, or the 400 Google answers for it."""
    if not isinstance(value, Mapping):
        raise ApiError(400, "required", f"Missing {which} time.")
    time_zone, zone = value.get("timeZone"), None
    if time_zone is not None:
        try:
            zone = zoneinfo.ZoneInfo(str(time_zone))
        except (zoneinfo.ZoneInfoNotFoundError, ValueError) as exc:
            raise ApiError(400, "invalid", f"Invalid time zone definition for {which} time.") from exc
    if value.get("dateTime"):
        try:
            moment = dt.datetime.fromisoformat(str(value["dateTime"]))
        except ValueError as exc:
            raise ApiError(400, "invalid", f"Invalid {which} time.") from exc
        if moment.tzinfo is None:
            if zone is None:
                raise ApiError(400, "required", f"Missing time zone definition for {which} time.")
            moment = moment.replace(tzinfo=zone)
        return moment
    if value.get("date"):
        try:
            return dt.date.fromisoformat(str(value["date"]))
        except ValueError as exc:
            raise ApiError(400, "invalid", f"Invalid {which} time.") from exc
    raise ApiError(400, "required", f"Missing {which} time.")


def check_event(body: Mapping[str, Any]) -> None:
    """Reject what Calendar v3 rejects on insert/update: bad times, bad status, attendees without email."""
    start = _parse_when(body.get("start") or {}, "start")
    end = _parse_when(body.get("end") or {}, "end")
    if isinstance(start, dt.datetime) != isinstance(end, dt.datetime):
        raise ApiError(400, "invalid", "Start and end times must either both be date or both be dateTime.")
    if end < start:
        raise ApiError(400, "timeRangeEmpty")
    if body.get("status", "confirmed") not in _STATUSES:
        raise ApiError(400, "invalid", "Invalid value for: status")
    for attendee in body.get("attendees") or ():
        if not isinstance(attendee, Mapping) or not attendee.get("email"):
            raise ApiError(400, "required", "Missing attendee email.")


def merge_patch(current: dict[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """PATCH semantics: nested objects merge, ``null`` removes a key."""
    merged = dict(current)
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(merged.get(key), dict):
            merged[key] = merge_patch(merged[key], value)
        else:
            merged[key] = value
    return merged


def _writable(event: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in event.items() if k not in _READ_ONLY and k != "sequence"}


def _check_if_match(event: Mapping[str, Any], request: Request) -> None:
    expected = request.header("if-match")
    if expected is not None and expected != "*" and expected != event["etag"]:
        raise ApiError(412, "conditionNotMet")


class EventStore:
    """Every calendar's events in memory; not locked itself: the app calls it with its lock held."""

    def __init__(self) -> None:
        self._etags: Iterator[int] = itertools.count(3181161784712000, 1000)
        self._calendars: dict[str, dict[str, dict[str, Any]]] = {}

    def reset(self) -> None:
        """Forget every event (etags keep growing, as Google's do)."""
        self._calendars.clear()

    def serve(self, request: Request) -> Response:
        """Route one request under ``/calendar/v3/`` (raises :class:`ApiError` for Google's refusals)."""
        # Split the raw path before decoding: calendar ids hold '@' and may hold an encoded '/'.
        segments = [unquote(s) for s in request.raw_path[len(API_PREFIX) :].split("/")]
        method, query = request.method, request.query
        override = request.header("x-http-method-override")
        if override and method == "POST":
            method = override.upper()
            if method == "GET":
                query = {**query, **parse_qs(request.body.decode(), keep_blank_values=True)}
        if len(segments) not in (3, 4) or segments[0] != "calendars" or segments[2] != "events":
            raise ApiError(404)
        events = self._calendars.setdefault(segments[1], {})
        if len(segments) == 3:
            if method == "GET":
                return self._list(segments[1], events, query)
            if method == "POST":
                return self._insert(segments[1], events, request.json() or {})
            raise ApiError(405, "httpMethodNotAllowed", "Method Not Allowed")
        event = events.get(segments[3])
        if event is None:
            raise ApiError(404)
        if method == "GET":
            return self._get(event, request)
        if method == "PUT":
            return self._write(segments[1], event, request, request.json() or {})
        if method == "PATCH":
            return self._write(segments[1], event, request, merge_patch(_writable(event), request.json() or {}))
        if method == "DELETE":
            return self._delete(event, request)
        raise ApiError(405, "httpMethodNotAllowed", "Method Not Allowed")

    def _next_etag(self) -> str:
        return f'"{next(self._etags)}"'

    def _store(
        self, calendar_id: str, event_id: str, body: Mapping[str, Any], previous: Mapping[str, Any]
    ) -> dict[str, Any]:
        check_event(body)
        now = now_rfc3339()
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
            **_writable(body),
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
            raise ApiError(400, "invalid", "Invalid resource id value.")
        elif event_id in events:
            raise ApiError(409, "duplicate")
        return Response.json(200, self._store(calendar_id, event_id, body, {}))

    @staticmethod
    def _get(event: Mapping[str, Any], request: Request) -> Response:
        if request.header("if-none-match") == event["etag"]:
            return Response(304)
        return Response.json(200, event)

    def _write(self, calendar_id: str, event: Mapping[str, Any], request: Request, body: Mapping[str, Any]) -> Response:
        _check_if_match(event, request)
        return Response.json(200, self._store(calendar_id, event["id"], body, event))

    def _delete(self, event: dict[str, Any], request: Request) -> Response:
        if event["status"] == "cancelled":
            raise ApiError(410, "deleted")
        _check_if_match(event, request)
        event.update(status="cancelled", etag=self._next_etag(), updated=now_rfc3339())
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
            raise ApiError(400, "invalid", "Invalid value for: maxResults or pageToken") from exc
        if size < 1 or offset < 0:
            raise ApiError(400, "invalid", "Invalid value for: maxResults or pageToken")
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
            "updated": now_rfc3339(),
            "timeZone": "UTC",
            "accessRole": "owner",
            "defaultReminders": [],
            "items": matching[offset : offset + size],
        }
        if offset + size < len(matching):
            page["nextPageToken"] = str(offset + size)
        return Response.json(200, page)

"""The Calendar v3 events collection: storage, the validation Google applies on writes, get/insert/update/patch/delete.

Documented by Google: the id alphabet and length, 409 ``duplicate`` (a cancelled event keeps its id), DELETE
answering 204 and a second one 410 ``deleted``, GET returning cancelled events, If-Match (412) /
If-None-Match (304), the start/end and attendee requirements, ``conferenceData`` ignored unless
``conferenceDataVersion=1`` and attachments unless ``supportsAttachments=true`` (their parameter descriptions),
that deleted events are only guaranteed their id and eventually disappear, and an attendee's read-only ``self``
and ``organizer`` (set on the calendar's own entry: its calendars organize their events).

Inferred or chosen (docs/notes/emulators.md): what a write to a cancelled event does (``deleted_writes`` of
:class:`~calsync_emulators.google.behaviour.GoogleBehaviour`), when cancelled events are reduced and forgotten
(``cancelled_retention``, ``cancelled_forget_after``), that a forgotten id may be inserted again, every
calendar id existing, and **which changes bump ``sequence``**. Google documents ``sequence`` only as "Sequence
number as per iCalendar"; RFC 5545 (3.8.7.4) makes the organizer increment it when DTSTART, DTEND, DURATION,
DUE, RRULE, RDATE, EXDATE or STATUS change, so the emulator bumps it by one when ``start`` or ``end`` (as
instants, or between date and dateTime), ``recurrence`` or ``status`` (a delete and a restore included)
change, and on nothing else (a summary edit, a no-op PUT: inferred). A ``sequence`` sent by the client that is
higher is taken as is; a lower one answers 400 "Invalid sequence value." (reported).
"""

from __future__ import annotations

import base64
import datetime as dt
import itertools
import re
import secrets
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from calsync_emulators.google.behaviour import GoogleBehaviour
from calsync_emulators.google.errors import ApiError
from calsync_emulators.google.schema import conform, schema
from calsync_emulators.google.times import parse_when, render_when, zone_named
from calsync_emulators.server import Response

_EVENT_ID = re.compile(r"[a-v0-9]{5,1024}")
_SERVER_FIELDS = frozenset({"kind", "etag", "htmlLink", "created", "updated", "creator", "organizer"})
_READ_ONLY = _SERVER_FIELDS | {"id", "iCalUID"}
_STATUSES = frozenset({"confirmed", "tentative", "cancelled"})
# An attendee's read-only flags: the calendar's own entry is ``self`` and, the calendar organizing, ``organizer``.
_ATTENDEE_READ_ONLY = ("self", "organizer")
_THE_CALENDAR = {"self": True, "organizer": True}
_STUB_FIELDS = ("kind", "etag", "id", "status", "updated")
_SEQUENCE_BELOW = (
    "Invalid sequence value. The specified sequence number is below the current sequence number of the resource."
)


def now_rfc3339() -> str:
    """The current time as Google writes ``updated`` (UTC, milliseconds, ``Z``)."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def check_event(body: Mapping[str, Any]) -> None:
    """Reject what Calendar v3 rejects on insert/update: bad times, bad status, attendees without email."""
    start = parse_when(body.get("start") or {}, "start")
    end = parse_when(body.get("end") or {}, "end")
    if type(start) is not type(end):
        raise ApiError(400, "invalid", "Start and end times must either both be date or both be dateTime.")
    if end < start:
        raise ApiError(400, "timeRangeEmpty")
    if body.get("status", "confirmed") not in _STATUSES:
        raise ApiError(400, "invalid", "Invalid value for: status")
    for attendee in body.get("attendees") or ():
        if not attendee.get("email"):
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


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def significant(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether a write changes what iCalendar's SEQUENCE tracks: start, end, recurrence or status (see module doc)."""
    if old.get("status") != new.get("status") or old.get("recurrence") != new.get("recurrence"):
        return True
    for which in ("start", "end"):
        if "start" not in old:  # a reduced cancelled stub: everything is new
            return True
        if parse_when(old[which], which) != parse_when(new[which], which):
            return True
    return False


@dataclass
class Entry:
    """One stored event: the resource as written (times as sent), its change position and when it was cancelled."""

    resource: dict[str, Any]
    position: int
    cancelled_at: float | None = None

    @property
    def cancelled(self) -> bool:
        """True for a deleted (``status: cancelled``) event."""
        return self.resource.get("status") == "cancelled"


class EventStore:
    """Every calendar's events in memory; not locked itself: the app calls it with its lock held.

    Every change takes the next position of one emulator-wide counter; sync tokens remember a position.
    ``on_change(calendar_id)`` is called after every change (the watch channels' hook).
    """

    def __init__(self, behaviour: GoogleBehaviour, on_change: Callable[[str], None]) -> None:
        self.behaviour = behaviour
        self._on_change = on_change
        self._etags: Iterator[int] = itertools.count(3181161784712000, 1000)
        self._positions: Iterator[int] = itertools.count(1)
        self.position = 0
        self._calendars: dict[str, dict[str, Entry]] = {}
        self.forgotten_upto: dict[str, int] = {}

    def reset(self) -> None:
        """Forget every event (etags and positions keep growing, as Google's do)."""
        self._calendars.clear()
        self.forgotten_upto.clear()

    def entries(self, calendar_id: str) -> list[Entry]:
        """A calendar's events in insertion order."""
        return list(self._calendars.get(calendar_id, {}).values())

    def entry(self, calendar_id: str, event_id: str) -> Entry:
        """One stored event, or 404."""
        found = self._calendars.get(calendar_id, {}).get(event_id)
        if found is None:
            raise ApiError(404)
        return found

    def present(self, resource: Mapping[str, Any], response_zone: str | None = None) -> dict[str, Any]:
        """The resource as an answer carries it: times in the response's, the event's or the calendar's zone."""
        zone = zone_named(response_zone, "the response") if response_zone else None
        calendar_zone = zone_named(self.behaviour.calendar_time_zone, "the calendar")
        shown = dict(resource)
        for which in ("start", "end", "originalStartTime"):
            if isinstance(shown.get(which), Mapping):
                shown[which] = render_when(shown[which], zone, calendar_zone)
        return shown

    def sweep(self, now: float) -> None:
        """Reduce cancelled events to a stub, then forget them, on the retention schedule of the behaviour."""
        retention, forget = self.behaviour.cancelled_retention, self.behaviour.cancelled_forget_after
        if retention is None and forget is None:
            return
        for calendar_id, events in self._calendars.items():
            for event_id, entry in list(events.items()):
                if entry.cancelled_at is None:
                    continue
                age = now - entry.cancelled_at
                if forget is not None and age >= forget:
                    del events[event_id]
                    self.forgotten_upto[calendar_id] = max(self.forgotten_upto.get(calendar_id, 0), entry.position)
                elif retention is not None and age >= retention:
                    entry.resource = {k: entry.resource[k] for k in _STUB_FIELDS if k in entry.resource}

    # --- routes ------------------------------------------------------------------------------------

    def get(self, calendar_id: str, event_id: str, if_none_match: str | None, time_zone: str | None) -> Response:
        """``events.get``: cancelled events included; 304 for a current ``If-None-Match``."""
        entry = self.entry(calendar_id, event_id)
        if if_none_match == entry.resource["etag"]:
            return Response(304)
        return Response.json(200, self.present(entry.resource, time_zone))

    def insert(self, calendar_id: str, body: Any, query: Mapping[str, list[str]]) -> Response:
        """``events.insert``: a client id must be base32hex and free (409 ``duplicate`` even when cancelled)."""
        body = self._conform(body)
        event_id = body.get("id")
        events = self._calendars.setdefault(calendar_id, {})
        if event_id is None:
            event_id = base64.b32hexencode(secrets.token_bytes(16)).decode().rstrip("=").lower()
        elif not _EVENT_ID.fullmatch(event_id):
            raise ApiError(400, "invalid", "Invalid resource id value.")
        elif event_id in events:
            raise ApiError(409, "duplicate")
        return Response.json(200, self.present(self._store(calendar_id, event_id, body, None, query)))

    def write(
        self,
        calendar_id: str,
        event_id: str,
        body: Any,
        query: Mapping[str, list[str]],
        if_match: str | None,
        *,
        patch: bool,
    ) -> Response:
        """``events.update`` (PUT, the full resource) or ``events.patch`` (merged, ``null`` removes)."""
        entry = self.entry(calendar_id, event_id)
        if entry.cancelled and self.behaviour.deleted_writes == "forbidden":
            raise ApiError(403, "forbidden", "Forbidden")
        _check_if_match(entry.resource, if_match)
        body = self._conform(body)
        if patch:
            writable = {k: v for k, v in entry.resource.items() if k not in _READ_ONLY}
            body = merge_patch(writable, body)
        return Response.json(200, self.present(self._store(calendar_id, event_id, body, entry, query)))

    def delete(self, calendar_id: str, event_id: str, if_match: str | None) -> Response:
        """``events.delete``: marks the event cancelled (204); 410 ``deleted`` when it already is."""
        entry = self.entry(calendar_id, event_id)
        if entry.cancelled:
            raise ApiError(410, "deleted")
        _check_if_match(entry.resource, if_match)
        previous = entry.resource.get("sequence", 0)
        entry.resource.update(status="cancelled", etag=self._next_etag(), updated=now_rfc3339(), sequence=previous + 1)
        entry.cancelled_at = time.time()
        self._touch(calendar_id, entry)
        return Response(204)

    # --- the user's own edits (control routes) ------------------------------------------------------

    def user_edit(self, calendar_id: str, event_id: str, changes: Any) -> dict[str, Any]:
        """Change an event as its owner did in Calendar's UI: merged like a PATCH, new etag, ``updated`` and
        change position (so a ``syncToken`` list reports it), checked like any write; a cancelled event
        cannot be edited (404 ``notFound``: the UI no longer shows it)."""
        entry = self.entry(calendar_id, event_id)
        if entry.cancelled:
            raise ApiError(404)
        writable = {k: v for k, v in entry.resource.items() if k not in _READ_ONLY}
        edited = merge_patch(writable, self._conform(changes))
        return self.present(self._store(calendar_id, event_id, edited, entry, {}))

    def user_delete(self, calendar_id: str, event_id: str) -> None:
        """Delete an event as its owner did: the same cancelled tombstone as ``events.delete`` (410 when already)."""
        self.delete(calendar_id, event_id, None)

    # --- plumbing ----------------------------------------------------------------------------------

    def _conform(self, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise ApiError(400, "parseError", "Parse Error")
        conformed: dict[str, Any] = conform(body, schema("Event"), "", strict=self.behaviour.strict)
        return conformed

    def _next_etag(self) -> str:
        return f'"{next(self._etags)}"'

    def _touch(self, calendar_id: str, entry: Entry) -> None:
        entry.position = self.position = next(self._positions)
        self._on_change(calendar_id)

    def _store(
        self,
        calendar_id: str,
        event_id: str,
        body: dict[str, Any],
        previous: Entry | None,
        query: Mapping[str, list[str]],
    ) -> dict[str, Any]:
        before: Mapping[str, Any] = previous.resource if previous else {}
        body = _without_nulls({k: v for k, v in body.items() if k not in _READ_ONLY})
        if (query.get("conferenceDataVersion") or ["0"])[-1] != "1":
            body.pop("conferenceData", None)
            if "conferenceData" in before:
                body["conferenceData"] = before["conferenceData"]
        if (query.get("supportsAttachments") or ["false"])[-1].lower() != "true":
            body.pop("attachments", None)
            if "attachments" in before:
                body["attachments"] = before["attachments"]
        check_event(body)
        body.setdefault("status", "confirmed")
        now = now_rfc3339()
        old_replies = {a["email"]: a for a in before.get("attendees") or ()}
        if body.get("attendees"):
            body["attendees"] = [
                {
                    "responseStatus": old_replies.get(a["email"], {}).get("responseStatus", "needsAction"),
                    **{k: v for k, v in a.items() if k not in _ATTENDEE_READ_ONLY},
                    **(_THE_CALENDAR if a["email"].casefold() == calendar_id.casefold() else {}),
                }
                for a in body["attendees"]
            ]
        event: dict[str, Any] = {
            "kind": "calendar#event",
            "etag": self._next_etag(),
            "id": event_id,
            "htmlLink": f"https://www.google.com/calendar/event?eid={event_id}",
            "created": before.get("created", now),
            "updated": now,
            "creator": {"email": calendar_id, "self": True},
            "organizer": {"email": calendar_id, "self": True},
            "reminders": {"useDefault": True},
            "eventType": "default",
            **body,
            "iCalUID": before.get("iCalUID", f"{event_id}@google.com"),
            "sequence": self._sequence(before, body),
        }
        entry = previous or Entry(event, 0)
        entry.resource = event
        entry.cancelled_at = time.time() if event["status"] == "cancelled" else None
        self._calendars.setdefault(calendar_id, {})[event_id] = entry
        self._touch(calendar_id, entry)
        return event

    @staticmethod
    def _sequence(before: Mapping[str, Any], body: Mapping[str, Any]) -> int:
        current: int = before.get("sequence", 0)
        given = body.get("sequence")
        if given is not None and given < current:
            raise ApiError(400, "invalid", _SEQUENCE_BELOW)
        if given is not None and given > current:
            return int(given)
        return current + 1 if before and significant(before, body) else current


def _check_if_match(event: Mapping[str, Any], expected: str | None) -> None:
    if expected is not None and expected != "*" and expected != event["etag"]:
        raise ApiError(412, "conditionNotMet")

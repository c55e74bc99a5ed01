"""Local event state as a Calendar v3 event resource: ids, bodies, re-applying our state on top of theirs, and the
fingerprint of the fields calsync owns.

The fingerprint reduces the fields calsync owns (summary, description, location, start, end and their time
zones, attendees, status) of a Calendar v3 resource, the same function for the body :func:`event_body` writes, for
the item a drift sweep reads (read_back.py) and for the event an adoption finds (:func:`shows`): times as UTC
instants to the second (Google answers in another offset than was sent), all-day days as dates, empty text as
missing, attendees as a set of case-folded addresses without the calendar's owner (Google may list the organizer
among them, marked ``organizer``/``self``; unverified on Google, so the owner is left out on both sides). A value
that does not parse is kept as its text.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
import zoneinfo
from collections.abc import Mapping
from typing import Any

from calsync.core.model.calendar import EventState, ExternalRef, SendUpdates, Target
from calsync.core.model.errors import InvalidRequest

SYNC_KEY_PROPERTY = "calsyncKey"
VERSION_PROPERTY = "calsyncVersion"

SEND_UPDATES: Mapping[SendUpdates, str] = {"all": "all", "external_only": "externalOnly", "none": "none"}
_MANAGED_FIELDS = ("summary", "description", "location", "start", "end", "attendees", "status")
_SERVER_FIELDS = frozenset(
    {"kind", "etag", "id", "htmlLink", "created", "updated", "creator", "organizer", "iCalUID", "sequence"}
)


def event_id_for(sync_key: str, generation: int = 0) -> str:
    """Same sync key and generation, same event id: a retried create collides with its own earlier attempt.

    A generation above 0 names the re-creation of an event whose earlier id Google holds as cancelled and
    refuses to restore; it is derived the same way, so a retry walks the same ids and never duplicates.
    """
    material = sync_key if generation == 0 else f"{sync_key}#generation-{generation}"
    # Lower-case base32hex is exactly Google's id alphabet [a-v0-9] (docs/notes/google-calendar.md); 52 characters.
    return base64.b32hexencode(hashlib.sha256(material.encode()).digest()).decode().rstrip("=").lower()


def _when(value: dt.date | dt.datetime, all_day: bool, time_zone: str) -> dict[str, str]:
    if all_day:
        return {"date": (value.date() if isinstance(value, dt.datetime) else value).isoformat()}
    if not isinstance(value, dt.datetime):
        raise InvalidRequest("a timed event needs datetimes for start and end, got a date")
    offset = value.utcoffset()
    if offset is not None and offset % dt.timedelta(minutes=1):  # a local mean time: RFC 3339 offsets are ±hh:mm
        value = value.astimezone(dt.UTC)
    return {"dateTime": value.isoformat(), **({"timeZone": time_zone} if time_zone else {})}


def event_body(event: EventState, target: Target) -> dict[str, Any]:
    """The full Calendar v3 resource for ``event``, marked with our keys so a lost create can be recognised."""
    optional = {"description": event.description, "location": event.location}
    return {
        "summary": event.title,
        "start": _when(event.start, event.all_day, event.time_zone),
        "end": _when(event.end, event.all_day, event.time_zone),
        "attendees": [{"email": address} for address in event.attendees],
        "status": event.status,
        "extendedProperties": {
            "private": {SYNC_KEY_PROPERTY: target.sync_key, VERSION_PROPERTY: str(event.version)},
        },
        **{name: text for name, text in optional.items() if text is not None},  # None: left out
    }


def reapply(current: Mapping[str, Any], wanted: Mapping[str, Any]) -> dict[str, Any]:
    """Our state on top of the event as it is now: keeps fields, properties and RSVPs we don't manage."""
    body = {k: v for k, v in current.items() if k not in _SERVER_FIELDS and k not in _MANAGED_FIELDS}
    body.update(wanted)
    properties = dict(current.get("extendedProperties") or {})
    properties["private"] = {**(properties.get("private") or {}), **wanted["extendedProperties"]["private"]}
    body["extendedProperties"] = properties
    replies = {a.get("email"): a for a in current.get("attendees") or ()}
    body["attendees"] = [{**replies.get(a["email"], {}), **a} for a in wanted["attendees"]]
    return body


def instant(value: Mapping[str, Any]) -> dt.date | dt.datetime | None:
    """A start/end as a comparable value: Google answers ``dateTime`` in another offset than we sent."""
    if value.get("date"):
        return dt.date.fromisoformat(str(value["date"]))
    if not value.get("dateTime"):
        return None
    moment = dt.datetime.fromisoformat(str(value["dateTime"]))
    if moment.tzinfo is None and value.get("timeZone"):
        moment = moment.replace(tzinfo=zoneinfo.ZoneInfo(str(value["timeZone"])))
    return moment


def private_properties(resource: Mapping[str, Any]) -> Mapping[str, Any]:
    """The event's private extended properties (ours among them); empty when it has none or they are malformed."""
    properties = resource.get("extendedProperties")
    private = properties.get("private") if isinstance(properties, Mapping) else None
    return private if isinstance(private, Mapping) else {}


def shows(current: Mapping[str, Any], wanted: Mapping[str, Any], owner: str) -> bool:
    """True when the event already shows our state: the same fingerprint (of ``owner``'s calendar), our properties."""
    ours = wanted["extendedProperties"]["private"]
    same = fingerprint_of(current, owner) == fingerprint_of(wanted, owner)
    return same and all(private_properties(current).get(key) == value for key, value in ours.items())


def check_ours(current: Mapping[str, Any], target: Target) -> None:
    """Refuse to adopt an event that carries another sync key (a cancelled stub may carry none)."""
    marker = private_properties(current).get(SYNC_KEY_PROPERTY)
    if marker != target.sync_key and not (marker is None and current.get("status") == "cancelled"):
        raise InvalidRequest(f"Google event {current.get('id')} exists but was not created by calsync for this target")


def ref_of(resource: Mapping[str, Any]) -> ExternalRef:
    """The id and etag Google answered with, as the pipeline records them."""
    return ExternalRef(external_id=str(resource["id"]), etag=resource.get("etag"))


def fingerprint_of(resource: Mapping[str, Any], owner: str) -> str:
    """The owned fields of a Calendar v3 event resource (a body we write or an item we read), normalized, hashed."""
    start, end = resource.get("start"), resource.get("end")
    owned = {
        **{field: _text(resource.get(field)) for field in ("summary", "description", "location")},
        "start": _moment(start),
        "end": _moment(end),
        "zones": [_text(when.get("timeZone")) if isinstance(when, Mapping) else "" for when in (start, end)],
        "attendees": _attendees(resource.get("attendees"), owner),
        "status": _text(resource.get("status")) or "confirmed",
    }
    canonical = json.dumps(owned, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def _text(value: Any) -> str:
    return value if isinstance(value, str) else "" if value is None else json.dumps(value, sort_keys=True)


def _moment(value: Any) -> str:
    """A start or end as ``date:YYYY-MM-DD`` or a UTC instant to the second; its text when it does not parse."""
    if not isinstance(value, Mapping):
        return _text(value)
    try:
        moment = instant(value)
    except (ValueError, TypeError, KeyError, OSError):  # a bad date/dateTime; an unknown zone: KeyError, OSError
        return _text(dict(value))
    if isinstance(moment, dt.datetime):
        if moment.tzinfo is not None:
            moment = moment.astimezone(dt.UTC)
        return moment.replace(microsecond=0).isoformat()
    return f"date:{moment.isoformat()}" if moment is not None else ""


def _attendees(value: Any, owner: str) -> list[str]:
    if not isinstance(value, list):
        return []
    found = set()
    for attendee in value:
        if not isinstance(attendee, Mapping) or attendee.get("organizer") is True or attendee.get("self") is True:
            continue
        email = attendee.get("email")
        if isinstance(email, str) and email.casefold() != owner.casefold():
            found.add(email.casefold())
    return sorted(found)

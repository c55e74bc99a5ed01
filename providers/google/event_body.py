"""Local event state as a Calendar v3 event resource: ids, bodies, and re-applying our state on top of theirs."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
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
    body: dict[str, Any] = {
        "summary": event.title,
        "start": _when(event.start, event.all_day, event.time_zone),
        "end": _when(event.end, event.all_day, event.time_zone),
        "attendees": [{"email": address} for address in event.attendees],
        "status": event.status,
        "extendedProperties": {
            "private": {SYNC_KEY_PROPERTY: target.sync_key, VERSION_PROPERTY: str(event.version)},
        },
    }
    if event.description is not None:
        body["description"] = event.description
    if event.location is not None:
        body["location"] = event.location
    return body


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


def shows(current: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    """True when the event already shows our state (times compared as instants, never as strings)."""
    for field in ("summary", "description", "location"):
        if current.get(field) != wanted.get(field):
            return False
    if current.get("status", "confirmed") != wanted.get("status", "confirmed"):
        return False
    for field in ("start", "end"):
        ours, theirs = wanted.get(field) or {}, current.get(field) or {}
        if instant(ours) != instant(theirs) or ours.get("timeZone") != theirs.get("timeZone"):
            return False
    if [a.get("email") for a in current.get("attendees") or ()] != [a["email"] for a in wanted["attendees"]]:
        return False
    ours = wanted["extendedProperties"]["private"]
    return all(private_properties(current).get(key) == value for key, value in ours.items())


def check_ours(current: Mapping[str, Any], target: Target) -> None:
    """Refuse to adopt an event that carries another sync key (a cancelled stub may carry none)."""
    marker = private_properties(current).get(SYNC_KEY_PROPERTY)
    if marker != target.sync_key and not (marker is None and current.get("status") == "cancelled"):
        raise InvalidRequest(f"Google event {current.get('id')} exists but was not created by calsync for this target")


def ref_of(resource: Mapping[str, Any]) -> ExternalRef:
    """The id and etag Google answered with, as the pipeline records them."""
    return ExternalRef(external_id=str(resource["id"]), etag=resource.get("etag"))

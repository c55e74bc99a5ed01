"""Local event state as a Calendar v3 event resource: ids, bodies, and re-applying our state on top of theirs."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
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


def event_id_for(sync_key: str) -> str:
    """Same sync key, same event id: a retried create collides with its own earlier attempt instead of duplicating."""
    # Lower-case base32hex is exactly Google's id alphabet [a-v0-9] (docs/notes/google-calendar.md); 52 characters.
    return base64.b32hexencode(hashlib.sha256(sync_key.encode()).digest()).decode().rstrip("=").lower()


def _when(value: dt.date | dt.datetime, all_day: bool, time_zone: str) -> dict[str, str]:
    if all_day:
        return {"date": (value.date() if isinstance(value, dt.datetime) else value).isoformat()}
    if not isinstance(value, dt.datetime):
        raise InvalidRequest("a timed event needs datetimes for start and end, got a date")
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


def check_ours(current: Mapping[str, Any], target: Target) -> None:
    """Refuse to adopt an event that carries another sync key (a cancelled stub may carry none)."""
    marker = ((current.get("extendedProperties") or {}).get("private") or {}).get(SYNC_KEY_PROPERTY)
    if marker != target.sync_key and not (marker is None and current.get("status") == "cancelled"):
        raise InvalidRequest(f"Google event {current.get('id')} exists but was not created by calsync for this target")


def ref_of(resource: Mapping[str, Any]) -> ExternalRef:
    """The id and etag Google answered with, as the pipeline records them."""
    return ExternalRef(external_id=str(resource["id"]), etag=resource.get("etag"))

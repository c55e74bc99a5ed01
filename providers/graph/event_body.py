"""Local event state as a Graph ``event`` resource: times, attendees, the shared marker, the transactionId.

Times: timed events are written as UTC instants (``timeZone: "UTC"``), a naive time being wall time in
``event.time_zone``; all-day events as midnights in the event's zone (Graph wants both at midnight, end
exclusive; ``end == start`` is read as one day).

Invitations (``send_updates``): Graph has no "send to none" mode; Exchange mails attendees whenever an
organizer's meeting with attendees is created, changed or deleted. So ``all`` and ``external_only`` write the
attendees (everyone is notified: Graph cannot tell external attendees apart), and ``none`` keeps them off
the event: a create carries no attendees and an update leaves the attendee list as it is.
"""

from __future__ import annotations

import datetime as dt
import uuid
import zoneinfo
from collections.abc import Mapping
from typing import Any, TypeGuard

from calsync.core.model.calendar import EventState, ExternalRef, SendUpdates
from calsync.core.model.content import representing
from calsync.core.model.errors import InvalidRequest
from calsync.core.model.markers import GRAPH_SYNC_KEY_PROPERTY_ID

_TRANSACTION_NAMESPACE = uuid.UUID("0b7c6c1e-5d0c-4c55-9a43-6f6b8d0c2f13")
_FORMAT = "%Y-%m-%dT%H:%M:%S"


def transaction_id_for(sync_key: str, replacing: str | None = None) -> str:
    """Same target, same transactionId: Graph drops a replayed create (best effort; the marker is the truth).

    A re-create of an event deleted behind our back seeds it with the gone event's id too, so Graph cannot
    mistake it for a replay of the first create (how long Graph remembers transactionIds is undocumented).
    """
    return str(uuid.uuid5(_TRANSACTION_NAMESPACE, sync_key if replacing is None else f"{sync_key}|{replacing}"))


def _zone(name: str) -> dt.tzinfo:
    try:
        return zoneinfo.ZoneInfo(name or "UTC")
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise InvalidRequest(f"unknown time zone {name!r}") from None


def _times(event: EventState) -> tuple[dict[str, str], ...]:
    zone = _zone(event.time_zone)
    if event.all_day:
        name = event.time_zone or "UTC"
        return tuple({"dateTime": f"{day.isoformat()}T00:00:00", "timeZone": name} for day in event.days())
    return tuple({"dateTime": moment.astimezone(dt.UTC).strftime(_FORMAT), "timeZone": "UTC"}
                 for moment in event.instants(zone))  # fmt: skip


def event_body(
    event: EventState, sync_key: str, send_updates: SendUpdates, *, create: bool, replacing: str | None = None
) -> dict[str, Any]:
    """The wanted state as a POST (``create``) or PATCH body; the transactionId only on a create.

    A time past Python's range in UTC raises :class:`~calsync.core.model.errors.UnrepresentableEvent` (no I/O here).
    """
    with representing(event, "Graph"):
        start, end = _times(event)
    body: dict[str, Any] = {
        "subject": event.title,
        "body": {"contentType": "text", "content": event.description or ""},
        "location": {"displayName": event.location or ""},
        "start": start,
        "end": end,
        "isAllDay": event.all_day,
        "singleValueExtendedProperties": [{"id": GRAPH_SYNC_KEY_PROPERTY_ID, "value": sync_key}],  # EWS's property
    }
    if send_updates != "none":
        body["attendees"] = [{"emailAddress": {"address": a}, "type": "required"} for a in event.attendees]
    elif create:
        body["attendees"] = []
    if create:
        body["transactionId"] = transaction_id_for(sync_key, replacing)
    return body


def marker_of(resource: Mapping[str, Any]) -> str | None:
    """The sync key an event read with ``$expand`` of our property carries, if any."""
    for prop in resource.get("singleValueExtendedProperties") or ():
        if isinstance(prop, Mapping) and str(prop.get("id", "")).lower() == GRAPH_SYNC_KEY_PROPERTY_ID.lower():
            value = prop.get("value")
            return str(value) if value is not None else None
    return None


def ref_of(resource: Mapping[str, Any]) -> ExternalRef:
    """The id and ``@odata.etag`` Graph answered with, as the pipeline records them."""
    return ExternalRef(external_id=str(resource["id"]), etag=resource.get("@odata.etag"))


def is_graph_ref(external_id: str | None, etag: str | None) -> TypeGuard[str]:
    """Whether a stored ref was written by this adapter (a weak ``W/"…"`` etag), not by EWS (a bare ChangeKey); its
    id is then known to be there."""
    return external_id is not None and etag is not None and etag.startswith('W/"')

"""Local event state as EWS calendar-item fields: times, attendees, invitations, and our sync-key property.

Times (as :mod:`calsync.core.model.change` defines them): a timed event takes date-times, a naive one being
wall time in ``event.time_zone`` (an IANA name) and an aware one an instant shown in that zone. All-day
events run from midnight of ``start`` to midnight of ``end`` in that zone, ``end`` exclusive (as
iCalendar and Google); ``end == start`` is read as one day. A zone whose offset then had seconds (a local
mean time before standard time: Los Angeles before 1883, Monrovia until 1972) is written in UTC instead:
xs:dateTime's offset is ``±hh:mm``, so Exchange refuses ``-07:52:58``; the instant stays exact.

Invitations: ``send_updates`` maps through :data:`SEND_MODES`. ``external_only`` has no EWS
equivalent (EWS cannot tell external attendees apart), so it sends to everyone, and everyone learns
of the change rather than external guests missing it. Only values valid for CreateItem, UpdateItem and
DeleteItem alike are used (exchangelib accepts different sets for each).
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Mapping
from typing import Any

from exchangelib import Attendee, Body, CalendarItem, EWSDateTime, EWSTimeZone, ExtendedProperty, Mailbox
from exchangelib.errors import UnknownTimeZone
from exchangelib.items import SEND_TO_ALL_AND_SAVE_COPY, SEND_TO_NONE

from calsync.core.model.calendar import EventState, SendUpdates
from calsync.core.model.content import representing
from calsync.core.model.errors import InvalidRequest
from calsync.core.model.markers import SYNC_KEY_PROPERTY_NAME, SYNC_KEY_PROPERTY_SET

SEND_MODES: Mapping[SendUpdates, str] = {
    "all": SEND_TO_ALL_AND_SAVE_COPY,
    "external_only": SEND_TO_ALL_AND_SAVE_COPY,
    "none": SEND_TO_NONE,
}

#: What an update writes: every field :func:`item_fields` sets.
UPDATE_FIELDS = ("subject", "body", "location", "start", "end", "is_all_day", "required_attendees")


class _SyncKey(ExtendedProperty):  # type: ignore[misc]
    """Our (tenant, event, account) key on the item: a private named property, also visible to Graph later."""

    property_set_id = SYNC_KEY_PROPERTY_SET
    property_name = SYNC_KEY_PROPERTY_NAME
    property_type = "String"


CalendarItem.register("calsync_sync_key", _SyncKey)
_MINUTE = dt.timedelta(minutes=1)

# exchangelib's length rules (255 characters), which it applies only while serializing, after connecting:
# checked up front so an over-long value is refused before any request (as content, never retried).
_SUBJECT = CalendarItem.get_field_by_fieldname("subject")
_ADDRESS = Mailbox.get_field_by_fieldname("email_address")


@functools.lru_cache(maxsize=1024)  # unknown names raise, so only real zones (a few hundred) are kept
def _time_zone(name: str) -> Any:
    # EWSTimeZone subclasses ZoneInfo, whose strong cache serves ZoneInfo itself only: each new instance re-read
    # the zone's file (3 % of an in-process create's CPU). Instances are immutable, so threads share them.
    try:
        return EWSTimeZone(name)
    except (UnknownTimeZone, ValueError) as exc:
        raise InvalidRequest(f"time zone {name!r} has no Exchange equivalent") from exc


def _instant(value: dt.datetime, tz: Any) -> Any:
    # Events read back from the store carry fixed UTC offsets (datetime.timezone), which exchangelib cannot
    # name ("UTC+01:00"): hand it the instant in UTC, then show it in the event's zone. A naive time is already in tz.
    return EWSDateTime.from_datetime(value if value.tzinfo is tz else value.astimezone(dt.UTC)).astimezone(tz)


def _midnight(day: dt.date, tz: Any) -> Any:
    return EWSDateTime(day.year, day.month, day.day, tzinfo=tz)


def item_fields(event: EventState) -> dict[str, Any]:
    """The CalendarItem fields that make Exchange show ``event``, built without I/O.

    A value exchangelib cannot take (a time past its range, a subject or address over 255 characters) raises
    :class:`~calsync.core.model.errors.UnrepresentableEvent`: permanent, never retried.
    """
    with representing(event, "Exchange"):
        return _fields(event)


def _whole_minutes(*moments: Any) -> bool:
    return all(not moment.utcoffset() % _MINUTE for moment in moments)


def _fields(event: EventState) -> dict[str, Any]:
    _SUBJECT.clean(event.title)
    for address in event.attendees:
        _ADDRESS.clean(address)
    tz = _time_zone(event.time_zone)
    if event.all_day:
        days = event.days()
        if not _whole_minutes(*(_midnight(day, tz) for day in days)):
            tz = _time_zone("UTC")  # a local mean time's offset: xs:dateTime cannot write it (module docstring)
        start, end = (_midnight(day, tz) for day in days)
    else:
        start, end = (_instant(moment, tz) for moment in event.instants(tz))
        if not _whole_minutes(start, end):
            start, end = start.astimezone(_time_zone("UTC")), end.astimezone(_time_zone("UTC"))
    attendees = [Attendee(mailbox=Mailbox(email_address=a), response_type="Unknown") for a in event.attendees]
    return {
        "subject": event.title,
        "body": Body(event.description) if event.description else None,
        "location": event.location or None,
        "start": start,
        "end": end,
        "is_all_day": event.all_day,
        "required_attendees": attendees or None,
    }

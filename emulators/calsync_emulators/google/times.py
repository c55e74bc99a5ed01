"""Event times: parsing ``start``/``end`` as Google validates them, and rendering them as Google answers.

Documented: a ``dateTime`` needs an offset unless ``timeZone`` is given; all-day events use ``date``; list's
``timeMin``/``timeMax`` are RFC 3339 with a mandatory offset, timeMin bounds an event's end (exclusive),
timeMax its start (exclusive), and an empty range is 400 ``timeRangeEmpty``; the ``timeZone`` parameter of
get/list is "the time zone used in the response", the calendar's by default.

Inferred (no page states it): a ``dateTime`` whose instant lies outside the years 0001-9999 in UTC (RFC 3339's
four-digit years), such as ``9999-12-31T22:00:00-08:00``, is 400 ``invalid`` "Invalid start time." like any other
bad time; Google's own range is undocumented and may be narrower, so the emulator is no kinder than Google. So
is an offset with seconds (``-07:52:58``, a local mean time Python writes for old dates): RFC 3339's offset is
``±hh:mm``. Only what a request sends is checked: a zone's own offsets for a naive ``dateTime`` are Google's.

Inferred (Google's samples show it, no page states it): an answer writes ``dateTime`` in the event's own
``timeZone`` when it has one (the request's ``timeZone`` parameter wins over it), else in the calendar's; UTC
is written with ``Z``; an all-day event's ``date`` counts as midnight of the calendar's time zone for the range
filters.
"""

from __future__ import annotations

import datetime as dt
import zoneinfo
from collections.abc import Mapping
from typing import Any

from calsync_emulators.google.errors import ApiError


def zone_named(name: str, what: str) -> zoneinfo.ZoneInfo:
    """An IANA zone, or the 400 Google answers for an unknown one."""
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError) as exc:
        raise ApiError(400, "invalid", f"Invalid time zone definition for {what}.") from exc


def parse_when(value: Any, which: str) -> dt.date | dt.datetime:
    """A start/end object as a comparable value (an aware datetime or a date), or the 400 Google answers for it."""
    if not isinstance(value, Mapping):
        raise ApiError(400, "required", f"Missing {which} time.")
    time_zone = value.get("timeZone")
    zone = zone_named(str(time_zone), f"{which} time") if time_zone is not None else None
    if value.get("dateTime"):
        try:
            moment = dt.datetime.fromisoformat(str(value["dateTime"]))
        except ValueError as exc:
            raise ApiError(400, "invalid", f"Invalid {which} time.") from exc
        offset = moment.utcoffset()
        if offset is not None and offset % dt.timedelta(minutes=1):  # RFC 3339's offsets are ±hh:mm
            raise ApiError(400, "invalid", f"Invalid {which} time.")
        if moment.tzinfo is None:
            if zone is None:
                raise ApiError(400, "required", f"Missing time zone definition for {which} time.")
            moment = moment.replace(tzinfo=zone)
        try:
            moment.astimezone(dt.UTC)
        except OverflowError as exc:  # an instant before year 1 or after 9999: RFC 3339 cannot write it
            raise ApiError(400, "invalid", f"Invalid {which} time.") from exc
        return moment
    if value.get("date"):
        try:
            return dt.date.fromisoformat(str(value["date"]))
        except ValueError as exc:
            raise ApiError(400, "invalid", f"Invalid {which} time.") from exc
    raise ApiError(400, "required", f"Missing {which} time.")


def instant(value: dt.date | dt.datetime, calendar_zone: dt.tzinfo) -> dt.datetime:
    """A parsed start/end as an aware instant (an all-day date is midnight in the calendar's zone)."""
    if isinstance(value, dt.datetime):
        return value
    return dt.datetime.combine(value, dt.time(), calendar_zone)


def rfc3339(moment: dt.datetime) -> str:
    """An aware datetime as Google writes it: seconds precision, ``Z`` for UTC, else the offset."""
    text = moment.isoformat(timespec="seconds")
    return text.removesuffix("+00:00") + "Z" if text.endswith("+00:00") else text


def render_when(value: Mapping[str, Any], response_zone: dt.tzinfo | None, calendar_zone: dt.tzinfo) -> dict[str, Any]:
    """A stored start/end as answered: ``dateTime`` in the response's, the event's or the calendar's zone."""
    if not value.get("dateTime"):
        return dict(value)
    moment = parse_when(value, "event")
    assert isinstance(moment, dt.datetime)
    own = value.get("timeZone")
    zone = response_zone or (zoneinfo.ZoneInfo(str(own)) if own else calendar_zone)
    return {**value, "dateTime": rfc3339(moment.astimezone(zone))}


def query_time(raw: str, name: str) -> dt.datetime:
    """A ``timeMin``/``timeMax``/``updatedMin`` parameter: RFC 3339 with a mandatory offset, else 400."""
    try:
        moment = dt.datetime.fromisoformat(raw)
    except ValueError as exc:
        raise ApiError(400, "invalid", f"Invalid value for: {name}", location=name) from exc
    if moment.tzinfo is None:
        raise ApiError(400, "invalid", f"Invalid value for: {name} (an offset is required)", location=name)
    return moment

"""The owned-fields fingerprint the mailbox adapters (Graph, EWS) compute for drift (core/model/drift.py).

Both sides of a comparison go through :func:`owned_fingerprint`: the body an adapter writes for an event and
the item it reads back. The normalization is what makes them equal when the calendar shows what calsync
wrote: a timed event's times as UTC instants to the second, an all-day event's first and last day (whatever
zone the provider shows its midnights in, the dates are what the user sees), missing and empty text alike
with surrounding whitespace and line-ending differences dropped, attendees as a sorted set of lower-cased
addresses. The result is a SHA-256 hex digest: short enough to store, and it never holds the user's text.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Iterable


def _text(value: str | None) -> str:
    lines = (value or "").replace("\r\n", "\n").replace("\r", "\n").split("\n")  # XML reads a lone CR as LF
    return "\n".join(line.rstrip() for line in lines).strip()


def _moment(value: dt.datetime | dt.date, all_day: bool) -> str:
    if all_day:
        return (value.date() if isinstance(value, dt.datetime) else value).isoformat()
    if not isinstance(value, dt.datetime):
        return dt.datetime(value.year, value.month, value.day, tzinfo=dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    aware = value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)
    # Through the timestamp: datetime subclasses (exchangelib's EWSDateTime) refuse astimezone(UTC).
    return dt.datetime.fromtimestamp(int(aware.timestamp()), dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def owned_fingerprint(
    *,
    title: str | None,
    start: dt.datetime | dt.date | None,
    last: dt.datetime | dt.date | None,
    all_day: bool,
    location: str | None,
    description: str | None,
    attendees: Iterable[str],
) -> str:
    """The digest of the fields calsync owns. ``last`` is the end of a timed event, the last day of an all-day one.

    A naive datetime is taken as UTC (providers answer in UTC when asked to).
    """
    fields = [
        _text(title),
        None if start is None else _moment(start, all_day),
        None if last is None else _moment(last, all_day),
        all_day,
        _text(location),
        _text(description),
        sorted({a.strip().lower() for a in attendees if a and a.strip()}),
    ]
    return hashlib.sha256(json.dumps(fields, separators=(",", ":")).encode()).hexdigest()

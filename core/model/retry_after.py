"""A provider's "come back later" hint, read once for every adapter: HTTP ``Retry-After`` or a number of seconds."""

from __future__ import annotations

import datetime as dt
import email.utils
import math

#: A hint longer than a day is read as a day: a broken or hostile header must not park a job for years.
MAX_RETRY_AFTER = 86_400.0


def parse_retry_after(value: str | float | None, *, now: dt.datetime | None = None) -> float | None:
    """Seconds to wait, from delta-seconds or an HTTP-date (RFC 9110); None when absent or unreadable."""
    if value is None or isinstance(value, bool):
        return None
    seconds = _seconds(value) if isinstance(value, float | int) else _from_text(value.strip(), now)
    if seconds is None:
        return None
    return min(max(0.0, seconds), MAX_RETRY_AFTER)


def _seconds(value: float) -> float | None:
    number = float(value)
    return None if math.isnan(number) else number


def _from_text(text: str, now: dt.datetime | None) -> float | None:
    if not text:
        return None
    try:
        return _seconds(float(text))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return (when - (now or dt.datetime.now(dt.UTC))).total_seconds()

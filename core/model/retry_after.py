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
    try:
        seconds = float(value.strip() if isinstance(value, str) else value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(str(value).strip())
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=dt.UTC)
        seconds = (when - (now or dt.datetime.now(dt.UTC))).total_seconds()
    return None if math.isnan(seconds) else min(max(0.0, seconds), MAX_RETRY_AFTER)

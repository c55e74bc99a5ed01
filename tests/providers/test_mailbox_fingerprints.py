"""The owned-fields fingerprint of the mailbox adapters: what it ignores and what it sees."""

from __future__ import annotations

import datetime as dt
from typing import Any

from calsync.providers.fingerprint import owned_fingerprint


def _digest(**changes: Any) -> str:
    fields: dict[str, Any] = {
        "title": "Standup",
        "start": dt.datetime(2030, 1, 2, 9, tzinfo=dt.UTC),
        "last": dt.datetime(2030, 1, 2, 10, tzinfo=dt.UTC),
        "all_day": False,
        "location": "Room 1",
        "description": "Line one\nLine two",
        "attendees": ["a@x.org"],
    }
    return owned_fingerprint(**{**fields, **changes})


def test_it_ignores_what_a_calendar_may_change_and_sees_every_owned_field() -> None:
    base = _digest()
    kathmandu = dt.timezone(dt.timedelta(hours=5, minutes=45))
    assert _digest(description=" Line one  \r\nLine two\n") == base
    assert _digest(description="Line one\rLine two") == base  # XML reads a lone CR as a LF
    assert _digest(attendees=["A@X.org "]) == base
    assert _digest(start=dt.datetime(2030, 1, 2, 14, 45, tzinfo=kathmandu)) == base
    assert _digest(location=None) == _digest(location="")
    for changed in ({"title": "Standup!"}, {"location": "Room 2"}, {"description": "Line one"}, {"attendees": []},
                    {"start": dt.datetime(2030, 1, 2, 9, 1, tzinfo=dt.UTC)}, {"all_day": True}):  # fmt: skip
        assert _digest(**changed) != base, changed

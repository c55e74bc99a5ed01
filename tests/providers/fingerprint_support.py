"""Drawn event content for the mailbox adapters' round-trip fingerprint tests (Hypothesis)."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from calsync.core.model.calendar import EventState

TEXT = st.text(st.characters(exclude_categories=("Cc", "Cs"), include_characters="\n\r\t "), max_size=40)
ZONES = ("UTC", "Europe/Copenhagen", "America/New_York", "Asia/Kathmandu", "Pacific/Kiritimati")
CONTENT = st.fixed_dictionaries({
    "title": TEXT.filter(str.strip),
    "description": TEXT,
    "location": TEXT,
    "attendees": st.lists(st.sampled_from(["bob@example.com", "Carol@Example.com", "dave@example.org"]),
                          unique=True, max_size=3).map(tuple),
    "time_zone": st.sampled_from(ZONES),
    "start": st.datetimes(min_value=dt.datetime(2027, 1, 1), max_value=dt.datetime(2030, 1, 1)).map(
        lambda t: t.replace(second=0, microsecond=0)),
    "minutes": st.integers(min_value=0, max_value=600),
    "all_day": st.booleans(),
})  # fmt: skip
ROUND_TRIP = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def drawn_event(base: EventState, drawn: dict[str, Any]) -> EventState:
    fields = {k: v for k, v in drawn.items() if k != "minutes"}
    start = drawn["start"]
    if drawn["all_day"]:
        fields.update(start=start.date(), end=start.date() + dt.timedelta(days=1 + drawn["minutes"] % 3))
    else:
        fields["end"] = start + dt.timedelta(minutes=drawn["minutes"])
    return dataclasses.replace(base, **fields, send_updates="all")


# A lone CR, which XML (EWS) reads back as a LF, and trailing blanks on a line.
LONE_CR = {"title": "T\r", "description": "one\rtwo  \n", "location": " ", "attendees": (), "time_zone": "UTC",
           "start": dt.datetime(2028, 5, 1, 9), "minutes": 30, "all_day": False}  # fmt: skip

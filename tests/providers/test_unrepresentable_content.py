"""Building a provider's request from content it cannot hold raises UnrepresentableEvent (permanent), not a raw
OverflowError or ValueError that the worker would retry as temporary (issue 30, finding 1); what submit accepts
is written in a form the provider takes."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from calsync.core.model.calendar import EventState, Target
from calsync.core.model.errors import UnrepresentableEvent, is_permanent
from calsync.providers.exchange.items import item_fields
from calsync.providers.google.event_body import event_body as google_body
from calsync.providers.graph.event_body import event_body

LOS_ANGELES, TOKYO = ZoneInfo("America/Los_Angeles"), ZoneInfo("Asia/Tokyo")
BUILDERS: dict[str, Callable[[EventState], Any]] = {
    "exchange": item_fields,
    "graph": lambda event: event_body(event, "t:e:a", "none", create=True),
}


def _event(**fields: Any) -> EventState:
    base: dict[str, Any] = {"id": "evt-1", "tenant_id": "t1", "version": 3, "title": "Planning",
                            "start": dt.datetime(2030, 1, 2, 10, tzinfo=TOKYO),
                            "end": dt.datetime(2030, 1, 2, 11, tzinfo=TOKYO), "time_zone": "Asia/Tokyo",
                            "all_day": False}  # fmt: skip
    return EventState(**{**base, **fields})


@pytest.mark.parametrize("adapter", sorted(BUILDERS))
@pytest.mark.parametrize(
    "far",
    [
        {"start": dt.datetime(9999, 12, 31, 22, tzinfo=LOS_ANGELES), "end": dt.datetime(9999, 12, 31, 23,
                                                                                      tzinfo=LOS_ANGELES),
         "time_zone": "America/Los_Angeles"},
        {"start": dt.datetime(1, 1, 1, 0, 30, tzinfo=TOKYO), "end": dt.datetime(1, 1, 1, 1, tzinfo=TOKYO)},
    ],
    ids=["year 10000 in UTC", "year 0 in UTC"],
)  # fmt: skip
def test_a_time_beyond_the_years_in_utc_is_unrepresentable(adapter: str, far: dict[str, Any]) -> None:
    with pytest.raises(UnrepresentableEvent, match="cannot represent event evt-1 version 3: OverflowError") as caught:
        BUILDERS[adapter](_event(**far))
    assert is_permanent(caught.value)


@pytest.mark.parametrize(("field", "value"), [("title", "t" * 256), ("attendees", ("a" * 250 + "@example.com",))])
def test_a_value_over_exchangelibs_255_characters_is_unrepresentable_before_any_request(field: str, value: Any) -> None:
    with pytest.raises(UnrepresentableEvent, match="exceeds length 255"):
        item_fields(_event(**{field: value}))


def test_what_submit_accepts_at_the_edges_is_represented() -> None:
    first = dt.datetime(1601, 1, 1, tzinfo=dt.UTC)
    for build in BUILDERS.values():
        build(_event(title="t" * 255, start=first, end=first + dt.timedelta(minutes=30), time_zone="UTC"))
        build(_event(all_day=True, start=dt.date(4500, 12, 30), end=dt.date(4500, 12, 31)))


@pytest.mark.parametrize(
    ("start", "end", "zone", "all_day"),
    [
        (dt.datetime(1970, 6, 1, 9, tzinfo=ZoneInfo("Africa/Monrovia")),
         dt.datetime(1970, 6, 1, 10, tzinfo=ZoneInfo("Africa/Monrovia")), "Africa/Monrovia", False),  # -00:44:30
        (dt.date(1850, 6, 1), dt.date(1850, 6, 2), "America/Los_Angeles", True),  # -07:52:58
    ],
)  # fmt: skip
def test_a_local_mean_times_offset_with_seconds_is_written_in_utc(
    start: Any, end: Any, zone: str, all_day: bool
) -> None:
    event = _event(start=start, end=end, time_zone=zone, all_day=all_day)
    fields = item_fields(event)
    assert fields["start"].ewsformat().endswith("Z") and fields["start"].tzinfo.ms_id == "UTC"  # xs:dateTime: ±hh:mm
    if not all_day:
        [when] = [google_body(event, Target(event.id, "a", event.tenant_id))["start"]]
        assert when == {"dateTime": "1970-06-01T09:44:30+00:00", "timeZone": zone}  # RFC 3339: ±hh:mm

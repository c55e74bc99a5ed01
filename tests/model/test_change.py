"""Change validation: every bad field is named, nothing else is accepted."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from calsync.core.model.change import parse_change
from calsync.core.model.errors import InvalidChange


def _upsert(**event: Any) -> dict[str, Any]:
    base = {"title": "Review", "start": "2026-12-01T09:00", "end": "2026-12-01T10:00", "time_zone": "Asia/Jakarta"}
    return {"operation": "upsert", "accounts": ["acc_1"], "event": {**base, **event}}


def test_naive_times_are_read_in_the_event_time_zone() -> None:
    change = parse_change(_upsert())
    assert change.event is not None
    assert change.event.start == dt.datetime(2026, 12, 1, 2, 0, tzinfo=dt.UTC)
    assert isinstance(change.event.start, dt.datetime) and str(change.event.start.tzinfo) == "Asia/Jakarta"


def test_all_day_events_take_exclusive_end_dates() -> None:
    change = parse_change(_upsert(all_day=True, start="2026-12-24", end="2026-12-26"))
    assert change.event is not None
    assert (change.event.start, change.event.end) == (dt.date(2026, 12, 24), dt.date(2026, 12, 26))


def test_attendees_are_deduplicated_case_insensitively() -> None:
    change = parse_change(_upsert(attendees=["A@example.com", "a@example.com", "b@example.com"]))
    assert change.event is not None and change.event.attendees == ("A@example.com", "b@example.com")


@pytest.mark.parametrize(
    ("document", "complaint"),
    [
        (_upsert(time_zone="Mars/Olympus"), "event.time_zone: unknown IANA time zone"),
        (_upsert(end="2026-12-01T08:00:00"), "end must be after start"),
        (_upsert(start="tomorrow"), "event.start: not a valid ISO 8601 date-time"),
        (_upsert(all_day=True), "event.start: not a valid date"),
        (_upsert(title=""), "event.title"),
        (_upsert(colour="red"), "event.colour: is not a known field"),
        (_upsert(attendees=["not-an-email"]), "event.attendees.0"),
        ({"operation": "upsert", "accounts": ["a"]}, "event is required for an upsert"),
        ({"operation": "delete"}, "entity_id is required for a delete"),
        ({"operation": "move", "entity_id": "e"}, "operation"),
        ({**_upsert(), "accounts": []}, "accounts"),
        ({**_upsert(), "accounts": ["tenant:acc"]}, "accounts.0"),
        ({**_upsert(), "send_updates": "everyone"}, "send_updates"),
        ([], "(root): must be a JSON object"),
    ],
)
def test_invalid_changes_name_the_field(document: Any, complaint: str) -> None:
    with pytest.raises(InvalidChange) as caught:
        parse_change(document)
    assert complaint in str(caught.value)

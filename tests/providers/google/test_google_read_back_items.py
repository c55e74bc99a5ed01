"""Drift read-back of Google items without a server: which listed items are calsync's, and their fingerprints."""

from __future__ import annotations

import dataclasses
import datetime as dt
import zoneinfo
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from calsync.core.model.calendar import EventState, Target
from calsync.providers.google.event_body import SYNC_KEY_PROPERTY, event_body, fingerprint_of, instant
from calsync.providers.google.read_back import observed

OWNER = "alice@example.com"
ZONES = ("UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata", "Australia/Lord_Howe")

_text = st.text(st.characters(blacklist_categories=["Cs"]), max_size=30)
_emails = st.lists(st.from_regex(r"[a-z]{1,8}@[a-z]{1,8}\.example", fullmatch=True), max_size=4, unique=True)


@st.composite
def events(draw: st.DrawFn) -> EventState:
    """Events as calsync holds them: timed in a zone (naive local times) or all-day."""
    all_day = draw(st.booleans())
    start = draw(st.datetimes(dt.datetime(2000, 1, 1), dt.datetime(2090, 12, 31))).replace(microsecond=0)
    length = dt.timedelta(days=draw(st.integers(1, 3))) if all_day else dt.timedelta(minutes=draw(st.integers(0, 600)))
    return EventState(
        id="ev-1",
        tenant_id="tenant-1",
        version=draw(st.integers(1, 9)),
        title=draw(_text),
        start=start.date() if all_day else start,
        end=(start + length).date() if all_day else start + length,
        time_zone=draw(st.sampled_from(ZONES)),
        all_day=all_day,
        location=draw(st.none() | _text),
        description=draw(st.none() | _text),
        attendees=tuple(draw(_emails)),
    )


def _body(event: EventState) -> dict[str, Any]:
    return event_body(event, Target(event_id=event.id, account_id="acct-1", tenant_id=event.tenant_id))


def as_google_answers(body: dict[str, Any], shown_in: str, attendee_order: list[int]) -> dict[str, Any]:
    """The item Google lists for ``body``: times in another offset, empty text dropped, its own fields added."""
    item = {k: v for k, v in body.items() if v != ""}
    for which in ("start", "end"):
        moment = instant(body[which])
        if isinstance(moment, dt.datetime):
            item[which] = {**body[which], "dateTime": moment.astimezone(zoneinfo.ZoneInfo(shown_in)).isoformat()}
    people = [{**body["attendees"][i], "responseStatus": "needsAction"} for i in attendee_order]
    people = [{**p, "email": p["email"].upper()} if n % 2 else p for n, p in enumerate(people)]
    item["attendees"] = [*people, {"email": OWNER, "organizer": True, "self": True, "responseStatus": "accepted"}]
    return {**item, "kind": "calendar#event", "etag": '"3181161784712000"', "id": "abc123", "sequence": 0}


@given(events(), st.sampled_from(ZONES), st.randoms())
def test_an_item_google_shows_as_written_has_the_fingerprint_of_the_body(
    event: EventState, shown_in: str, random: Any
) -> None:
    body = _body(event)
    order = list(range(len(body["attendees"])))
    random.shuffle(order)
    assert fingerprint_of(as_google_answers(body, shown_in, order), OWNER) == fingerprint_of(body, OWNER)


@given(events(), st.sampled_from(["title", "start", "time_zone", "attendees", "location"]))
def test_a_change_to_an_owned_field_changes_the_fingerprint(event: EventState, field: str) -> None:
    second = dt.timedelta(seconds=1) if not event.all_day else dt.timedelta(days=1)
    changed: dict[str, Any] = {
        "title": {"title": event.title + "!"},
        "start": {"start": event.start - second},
        "time_zone": {"time_zone": "Pacific/Chatham" if event.time_zone != "Pacific/Chatham" else "UTC"},
        "attendees": {"attendees": (*event.attendees, "new@elsewhere.example")},
        "location": {"location": (event.location or "") + "Room 2"},
    }
    if field == "time_zone" and event.all_day:
        return  # an all-day event is written without a zone
    other = dataclasses.replace(event, **changed[field])
    assert fingerprint_of(_body(other), OWNER) != fingerprint_of(_body(event), OWNER)


def test_empty_text_is_missing_text_and_the_version_is_not_owned() -> None:
    event = EventState(
        id="e", tenant_id="t", version=1, title="x", start=dt.date(2026, 1, 1), end=dt.date(2026, 1, 2),
        time_zone="", all_day=True, description="",
    )  # fmt: skip
    same = dataclasses.replace(event, description=None, version=7)
    assert fingerprint_of(_body(event), OWNER) == fingerprint_of(_body(same), OWNER)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=12,
)
_fields = st.sampled_from(["id", "etag", "status", "start", "end", "summary", "attendees", "extendedProperties"])


@given(st.dictionaries(_fields | _text, _json, max_size=8), st.sampled_from(["cancelled", "confirmed", None]))
@example({"start": {"dateTime": "2026-01-01T10:00:00", "timeZone": "America"}}, "confirmed")  # a folder of zones
def test_any_item_google_might_list_is_read_or_skipped_never_a_crash(item: dict[str, Any], status: str | None) -> None:
    item = {"id": "x1", **item, "status": status, "extendedProperties": {"private": {SYNC_KEY_PROPERTY: "k"}}}
    seen = observed(item, OWNER)
    assert seen is None or (seen.sync_key == "k" and seen.removed == (status == "cancelled"))
    assert seen is not None or not isinstance(item["id"], str) or not item["id"]


def test_which_listed_items_are_calsyncs() -> None:
    ours: dict[str, Any] = {"extendedProperties": {"private": {SYNC_KEY_PROPERTY: "t:e:a"}}}
    when: dict[str, Any] = {"start": {"date": "2026-01-01"}, "end": {"date": "2026-01-02"}}
    listed: list[dict[str, Any]] = [
        {"id": "mine1", "etag": '"1"', "status": "confirmed", **when, **ours},
        {"id": "user1", "etag": '"2"', "status": "confirmed", **when},
        {"id": "gone1", "etag": '"3"', "status": "cancelled", **when, **ours},
        {"id": "user2", "etag": '"4"', "status": "cancelled", **when},  # the user's own, deleted, body kept
        {"id": "stub1", "status": "cancelled"},  # reduced: only its id is guaranteed
    ]
    seen = [observed(item, OWNER) for item in listed]
    assert [(s.external_id, s.sync_key, s.removed) if s else None for s in seen] == [
        ("mine1", "t:e:a", False),
        None,
        ("gone1", "t:e:a", True),
        None,
        ("stub1", None, True),
    ]
    assert seen[0] is not None and seen[0].fingerprint == fingerprint_of(listed[0], OWNER)
    assert seen[2] is not None and seen[2].fingerprint is None


def test_the_calendar_itself_among_the_attendees_is_not_an_edit_whatever_the_calendar_is_called() -> None:
    event = EventState(
        id="e", tenant_id="t", version=1, title="x", start=dt.date(2026, 1, 1), end=dt.date(2026, 1, 2),
        time_zone="", all_day=True, attendees=("bob@example.com",),
    )  # fmt: skip
    item = {**_body(event), "attendees": [{"email": "bob@example.com"}, {"email": OWNER, "self": True}]}
    assert fingerprint_of(item, "primary") == fingerprint_of(_body(event), "primary")
    # calsync invites the calendar's owner: Google shows that attendee as the calendar itself.
    inviting = dataclasses.replace(event, attendees=("bob@example.com", OWNER.upper()))
    assert fingerprint_of(item, OWNER) == fingerprint_of(_body(inviting), OWNER)

"""Hypothesis strategies for change documents: drawn from the published change schema, plus the edges that
schema cannot show (extreme dates and zones, control characters, lone surrogates, astral characters, huge
numbers), used by the cross-door content test (tests/integration/test_content_doors.py)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from calsync.core.model.content import DESCRIPTION_MAX, LOCATION_MAX, TITLE_MAX

SCHEMA_FILE = Path(__file__).resolve().parents[2] / "docs" / "schemas" / "change.schema.json"

ZONES = ("UTC", "America/Los_Angeles", "Asia/Tokyo", "Pacific/Kiritimati", "Etc/GMT+12", "Asia/Kathmandu",
         "Australia/Lord_Howe", "Europe/Berlin", "America/New_York", "Europe/London", "Australia/Sydney",
         "localtime", "Mars/Olympus")  # fmt: skip
#: Wall times at the edges: the years calsync keeps (1601-4500) and Python's (1-9999), a DST gap in Berlin.
#: (Hypothesis favours the first of a list: each list starts with an ordinary value.)
EDGE_TIMES = (dt.datetime(2026, 12, 1, 9, 0), dt.datetime(1, 1, 1, 0, 30), dt.datetime(1600, 12, 31, 23, 0),
              dt.datetime(1601, 1, 1, 0, 0), dt.datetime(1601, 1, 1, 5, 0), dt.datetime(2026, 3, 29, 2, 30),
              dt.datetime(4500, 12, 31, 15, 0), dt.datetime(4500, 12, 31, 23, 59),
              dt.datetime(9999, 12, 31, 22, 0))  # fmt: skip
OFFSETS = ("", "", "Z", "+14:00", "-12:00", "+05:45")
SPANS = (dt.timedelta(hours=1), dt.timedelta(minutes=1), dt.timedelta(days=1), dt.timedelta(days=400),
         dt.timedelta(0), -dt.timedelta(hours=1))  # fmt: skip
DAYS = (dt.timedelta(days=1), dt.timedelta(days=2), dt.timedelta(days=400), dt.timedelta(0), -dt.timedelta(days=1))
#: Characters a calendar or a database may choke on, and some it must take.
EDGE_CHARACTERS = ("\x00", "\x01", "\t", "\n", "\r", "\x0b", "\x1b", "\x7f", "\x85", "\x9f", "\ufdd0", "\ufffe",
                   "\uffff", "\ud800", "\udfff", "\U0001f5d3", "\U0010ffff", "\u2028", "é", "会")  # fmt: skip
HUGE = st.one_of(st.integers(min_value=-(10**300), max_value=10**300), st.floats(allow_nan=False, allow_infinity=False))


def schema() -> dict[str, Any]:
    """The committed change schema."""
    loaded: dict[str, Any] = json.loads(SCHEMA_FILE.read_text())
    return loaded


def from_schema(node: Mapping[str, Any], root: Mapping[str, Any]) -> st.SearchStrategy[Any]:
    """Values of the schema's shapes: its types, patterns, lengths, enums and object properties.

    ``if``/``then``/``else`` and ``allOf`` are not followed, so some documents break them: the doors must
    refuse those alike. Lists are kept short (at most 3 items).
    """
    if "$ref" in node:
        target: Any = root
        for part in str(node["$ref"]).removeprefix("#/").split("/"):
            target = target[part]
        return from_schema(target, root)
    if "anyOf" in node:
        base = {k: v for k, v in node.items() if k != "anyOf"}
        return st.one_of([from_schema({**base, **branch}, root) for branch in node["anyOf"]])
    if "enum" in node:
        return st.sampled_from(node["enum"])
    if "const" in node:
        return st.just(node["const"])
    kind = node.get("type")
    if kind == "string":
        return _strings(node)
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    if kind == "array":
        items = from_schema(node["items"], root)
        return st.lists(items, min_size=node.get("minItems", 0), max_size=min(node.get("maxItems", 3), 3))
    if kind == "object":
        properties = {name: from_schema(sub, root) for name, sub in node.get("properties", {}).items()}
        required = set(node.get("required", ()))
        return st.fixed_dictionaries({k: v for k, v in properties.items() if k in required},
                                     optional={k: v for k, v in properties.items() if k not in required})  # fmt: skip
    raise AssertionError(f"the change schema grew a shape this strategy does not know: {node}")


def _strings(node: Mapping[str, Any]) -> st.SearchStrategy[str]:
    low, high = node.get("minLength", 0), node.get("maxLength", 64)
    if "pattern" not in node:
        return st.text(min_size=low, max_size=high)
    return st.from_regex(node["pattern"], fullmatch=True).filter(lambda s: low <= len(s) <= high)


def edge_text(limit: int, *, min_size: int = 0) -> st.SearchStrategy[str]:
    """Any text, text with the edge characters, and strings just around ``limit`` characters long."""
    alphabet = st.one_of(st.sampled_from(EDGE_CHARACTERS), st.characters())
    around = st.builds(lambda char, n: char * n, st.sampled_from(("x", "\U0001f5d3", "\x00")),
                       st.sampled_from((limit - 1, limit, limit + 1)))  # fmt: skip
    plain = st.text(st.characters(exclude_categories=("Cc", "Cs")), min_size=min_size, max_size=12)
    return st.one_of(plain, plain, st.text(alphabet, min_size=min_size, max_size=12), around)


@st.composite
def _span(draw: st.DrawFn, all_day: bool, times: st.SearchStrategy[dt.datetime]) -> tuple[str, str]:
    start = draw(times)
    span = draw(st.sampled_from(DAYS if all_day else SPANS))
    try:
        end = start + span
    except OverflowError:
        end = start
    if all_day:
        return start.date().isoformat(), end.date().isoformat()
    offset = draw(st.sampled_from(OFFSETS))
    return start.isoformat() + offset, end.isoformat() + offset


_INSIDE = st.datetimes(min_value=dt.datetime(1601, 1, 2), max_value=dt.datetime(4500, 12, 30))
_PLAIN = st.text(st.characters(exclude_categories=("Cc", "Cs")), min_size=1, max_size=12)
_EDGES = ("title", "times", "zone", "location", "description", "attendee", "huge")


@st.composite
def edge_documents(draw: st.DrawFn, accounts: Sequence[str]) -> dict[str, Any]:
    """An ordinary upsert pushed to none, one or a few edges (each may still be valid: a 255-character title)."""
    all_day = draw(st.booleans())
    start, end = draw(_span(all_day, _INSIDE))
    event: dict[str, Any] = {"title": draw(_PLAIN), "start": start, "end": end, "all_day": all_day,
                             "time_zone": draw(st.sampled_from(ZONES[:-2]))}  # fmt: skip
    doc: dict[str, Any] = {"operation": "upsert", "event": event,
                           "accounts": draw(st.lists(st.sampled_from(accounts), min_size=1, max_size=2))}  # fmt: skip
    if draw(st.booleans()):
        doc["entity_id"] = draw(st.from_regex(r"evt-[a-z0-9]{1,8}", fullmatch=True))
    for edge in draw(st.lists(st.sampled_from(_EDGES), max_size=3, unique=True)):
        if edge == "title":
            event["title"] = draw(edge_text(TITLE_MAX, min_size=1))
        elif edge == "times":
            times = st.one_of(st.sampled_from(EDGE_TIMES), st.datetimes())
            event["start"], event["end"] = draw(_span(all_day, times))
        elif edge == "zone":
            event["time_zone"] = draw(st.sampled_from(ZONES))
        elif edge in ("location", "description"):
            event[edge] = draw(edge_text(LOCATION_MAX if edge == "location" else DESCRIPTION_MAX))
        elif edge == "attendee":
            local = draw(st.sampled_from(("ann", "b\x00b", "c\u0085c", "d" * 242, "e" * 243, "f\U0001f5d3")))
            event["attendees"] = [f"{local}@example.com"]
        else:
            where = draw(st.sampled_from(("title", "start", "all_day", "time_zone", "accounts", "entity_id")))
            (doc if where in ("accounts", "entity_id") else event)[where] = draw(HUGE)
    return doc


def changes(accounts: Sequence[str]) -> st.SearchStrategy[dict[str, Any]]:
    """Documents from the schema (half of them naming the test's accounts, so more get past authorization),
    and twice as many edge documents."""

    def known_accounts(doc: dict[str, Any], use: bool) -> dict[str, Any]:
        return {**doc, "accounts": list(accounts)} if use and isinstance(doc, dict) else doc

    schema_docs = st.builds(known_accounts, from_schema(schema(), schema()), st.booleans())
    return st.one_of(schema_docs, edge_documents(accounts), edge_documents(accounts))


def explicit_examples(accounts: Sequence[str]) -> list[dict[str, Any]]:
    """The edges every run tries whatever Hypothesis draws: the values of issue 30 and each rule's boundary."""

    def upsert(**event: Any) -> dict[str, Any]:
        fields = {"title": "Planning", "start": "2026-12-01T09:00:00", "end": "2026-12-01T10:00:00",
                  "time_zone": "Europe/Berlin", **event}  # fmt: skip
        return {"operation": "upsert", "accounts": list(accounts), "event": fields}

    far = {"start": "9999-12-31T22:00", "end": "9999-12-31T23:00", "time_zone": "America/Los_Angeles"}
    early = {"start": "0001-01-01T00:30", "end": "0001-01-01T01:00", "time_zone": "Asia/Tokyo"}
    return [
        upsert(title="a\x00b"),
        upsert(title="a\x7fb"),
        upsert(title="a\ufffeb"),
        upsert(title="half \ud83d"),
        upsert(title="x" * TITLE_MAX),
        upsert(title="\U0001f5d3" * TITLE_MAX),
        upsert(title="x" * (TITLE_MAX + 1)),
        upsert(description=("d\t\r\n" * DESCRIPTION_MAX)[:DESCRIPTION_MAX]),
        upsert(description="d" * (DESCRIPTION_MAX + 1)),
        upsert(location="Room \u2028\u0085 7"),
        upsert(attendees=["b\x00b@example.com"]),
        upsert(**far),
        upsert(**early),
        upsert(start="1601-01-01T00:00:00Z", end="4500-12-31T23:59:59Z", time_zone="UTC"),
        upsert(start="4500-12-31T15:00", end="4500-12-31T16:30", time_zone="America/Los_Angeles"),
        upsert(start="1601-01-01T09:30", end="1601-01-01T10:00", time_zone="Asia/Tokyo"),
        upsert(all_day=True, start="4500-12-30", end="4500-12-31", time_zone="Pacific/Kiritimati"),
        upsert(all_day=True, start="1601-01-01", end="1601-01-02", time_zone="Etc/GMT+12"),
        upsert(start="1970-06-01T09:00", end="1970-06-01T10:00", time_zone="Africa/Monrovia"),  # -00:44:30
        upsert(all_day=True, start="1850-06-01", end="1850-06-02", time_zone="America/Los_Angeles"),  # -07:52:58
        upsert(time_zone="localtime"),
        upsert(title=10**300),
        upsert(start=1e308),
    ]

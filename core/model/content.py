"""What every calendar calsync writes to can hold: the characters, lengths and years of an event's content.

A change is checked against these rules at submit, whichever door it came through (core/model/change.py), so
an accepted event can be written by every adapter: Google Calendar, Exchange over EWS (exchangelib) and over
Graph, and stored by PostgreSQL and SQLite alike. Why each bound is what it is: docs/notes/content.md.

- Text (title, location, description, attendee addresses, request and trace ids) holds no character that a
  calendar cannot store as given: NUL (PostgreSQL's text refuses it), the other C0 controls but tab, line feed
  and carriage return, DEL and the C1 controls but U+0085, and the noncharacters U+FDD0-U+FDDF, U+FFFE, U+FFFF
  (XML cannot carry them: exchangelib writes each as ``?``). Lone surrogates cannot be encoded as UTF-8 at
  all; pydantic refuses them in every constrained string (``string_unicode``).
- Times: every start and end lies in the years 1601 to 4500, both as written (in the event's time zone) and
  as a UTC instant (an all-day date counts as its midnight in the event's zone). That is Exchange's calendar
  range; Google's and Python's are wider.

An adapter that still meets content it cannot represent (an event stored before these rules) raises
:class:`UnrepresentableEvent` from :func:`representing`: a permanent error, dead-lettered at once.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import re
from collections.abc import Iterator
from typing import Any, Final

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, core_schema

from calsync.core.model.calendar import EventState
from calsync.core.model.errors import UnrepresentableEvent

#: The characters no text may hold, as a regular-expression class body (Python, Rust and ECMA-262 read it alike).
UNSTORABLE_CHARACTERS: Final = (
    r"\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F-\u0084\u0086-\u009F\uFDD0-\uFDDF\uFFFE\uFFFF"
)
TEXT_PATTERN: Final = f"^[^{UNSTORABLE_CHARACTERS}]*$"
_UNSTORABLE = re.compile(f"[{UNSTORABLE_CHARACTERS}]")
_NAMES: Final = {0: "NUL", 0x7F: "DEL"}

FIRST_YEAR: Final = 1601
LAST_YEAR: Final = 4500

#: Longest values, in characters: what Exchange (exchangelib's 255-character subject and address fields) and
#: Google (a description of about 8,192 characters) accept; docs/notes/content.md.
TITLE_MAX: Final = 255
LOCATION_MAX: Final = 1024
DESCRIPTION_MAX: Final = 8192
ADDRESS_MAX: Final = 254  # RFC 5321's longest path less its angle brackets; exchangelib takes 255


def _character(char: str) -> str:
    code = ord(char)
    name = _NAMES.get(code, "a control character" if code < 0xA0 else "a noncharacter")
    return f"U+{code:04X} ({name})"


def storable(value: str) -> str:
    """``value`` if every calendar can store it as given, else a ValueError naming the first character it cannot."""
    bad = _UNSTORABLE.search(value)
    if bad is not None:
        raise ValueError(
            f"contains {_character(bad.group())} at character {bad.start() + 1}: calendars cannot store control "
            "characters (tab, line feed and carriage return are fine) or U+FDD0-U+FDDF, U+FFFE, U+FFFF"
        )
    return value


class _Storable:
    """Annotated metadata: :func:`storable` checks the value, and the JSON Schema states the same set as ``pattern``."""

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_after_validator_function(storable, handler(source))

    def __get_pydantic_json_schema__(self, schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        published = handler(schema)
        published["pattern"] = TEXT_PATTERN
        return published


#: Put in a text field's ``Annotated[str, ...]``: only characters every calendar stores.
STORABLE: Final = _Storable()


def within_years(value: dt.date | dt.datetime, zone: dt.tzinfo) -> dt.date | dt.datetime:
    """``value`` shown in the event's ``zone`` when it lies in the years every calendar holds, as written and in
    UTC; else a ValueError saying so.

    A naive date-time is wall time in ``zone``, an aware one the same instant shown there; an all-day date counts
    as its midnight in ``zone``.
    """
    try:
        if isinstance(value, dt.datetime):
            value = value.replace(tzinfo=zone) if value.tzinfo is None else value.astimezone(zone)
        moment = value if isinstance(value, dt.datetime) else dt.datetime.combine(value, dt.time(), zone)
        utc = moment.astimezone(dt.UTC)
    except OverflowError:  # a time whose offset crosses year 1 or 9999
        raise ValueError(f"must lie in the years {FIRST_YEAR} to {LAST_YEAR}") from None
    if not FIRST_YEAR <= value.year <= LAST_YEAR:
        raise ValueError(f"must lie in the years {FIRST_YEAR} to {LAST_YEAR}")
    if not FIRST_YEAR <= utc.year <= LAST_YEAR:
        raise ValueError(f"must lie in the years {FIRST_YEAR} to {LAST_YEAR} in UTC too (it is {utc:%Y-%m-%dT%H:%M}Z)")
    return value


@contextlib.contextmanager
def representing(event: EventState, provider: str) -> Iterator[None]:
    """Build a provider's request from ``event``: a value it cannot represent is permanent, never retried.

    Only the building goes in the block, no I/O: a ValueError or OverflowError there can only come from the
    event's content (a date past the library's range, a value over a field's limit).
    """
    try:
        yield
    except (ValueError, OverflowError) as exc:
        raise UnrepresentableEvent(
            f"{provider} cannot represent event {event.id} version {event.version}: {type(exc).__name__}: {exc}"
        ) from exc

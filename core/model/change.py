"""What other services submit: a change to one calendar event, validated before anything is saved.

A change file / ``submit_change`` argument looks like::

    {"entity_id": "evt_1" (optional: absent = new event),
     "operation": "upsert" | "delete",
     "event": {"title", "start", "end", "time_zone", "all_day", "location", "description", "attendees"},
     "accounts": ["acc_1", ...]  (the full set of accounts the event must appear in; optional on updates),
     "send_updates": "all" | "external_only" | "none"}

Timed events take ISO 8601 date-times (``YYYY-MM-DDTHH:MM[:SS[.ffffff]]`` with an optional ``Z`` or
``±HH:MM``; naive ones are read in ``time_zone``); all-day events take dates, with ``end`` exclusive as
in iCalendar and Google Calendar. Values are taken as typed (a boolean is ``true``/``false``, never
``"yes"`` or ``1``) so that the published JSON Schema (docs/schemas/change.schema.json) accepts exactly
what this model accepts, but for what a schema cannot state: ``end`` after ``start``, a time zone
that exists, a calendar date that exists, times within the years every calendar holds (also in UTC),
no lone surrogate (docs/PROTOCOL.md). Text and times follow the rules of core/model/content.py, so every
adapter can write what is accepted and every door (Python, ``calsync submit``, HTTP, the intake actor)
gives the same verdict.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StringConstraints,
    ValidationError,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from calsync.core.model.calendar import SendUpdates
from calsync.core.model.content import (
    ADDRESS_MAX,
    DESCRIPTION_MAX,
    LOCATION_MAX,
    STORABLE,
    TITLE_MAX,
    UNSTORABLE_CHARACTERS,
    within_years,
)
from calsync.core.model.errors import InvalidChange
from calsync.core.model.ids import Identifier
from calsync.core.model.validation_wording import describe_validation_error

_ADDRESS_PART = rf"[^@\s{UNSTORABLE_CHARACTERS}]+"
Email = Annotated[str, StringConstraints(pattern=rf"^{_ADDRESS_PART}@{_ADDRESS_PART}\.{_ADDRESS_PART}$",
                                         max_length=ADDRESS_MAX)]  # fmt: skip

# The accepted spellings, shared by the parser and the JSON Schema ([0-9], not \d: Python's \d is Unicode).
_DAY = r"[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
_TIME = r"([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9](\.[0-9]{1,6})?)?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])?"
DATE_PATTERN = f"^{_DAY}$"
DATE_TIME_PATTERN = f"^{_DAY}T{_TIME}$"
ZONE_PATTERN = r"^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+)*$"
Instant = Annotated[
    dt.datetime | dt.date,
    WithJsonSchema({"type": "string", "anyOf": [{"pattern": DATE_TIME_PATTERN}, {"pattern": DATE_PATTERN}]}),
]


def _times_follow(all_day: bool) -> dict[str, Any]:
    pattern = DATE_PATTERN if all_day else DATE_TIME_PATTERN
    return {"properties": {"start": {"pattern": pattern}, "end": {"pattern": pattern}}}


class EventFields(BaseModel):
    """The business fields of an event, as a producer states them."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        json_schema_extra={
            "if": {"properties": {"all_day": {"const": True}}, "required": ["all_day"]},
            "then": _times_follow(all_day=True),
            "else": _times_follow(all_day=False),
        },
    )

    title: Annotated[str, StringConstraints(min_length=1, max_length=TITLE_MAX), STORABLE]
    # time_zone and all_day come before start/end: the time validators read them.
    time_zone: Annotated[str, StringConstraints(pattern=ZONE_PATTERN, max_length=64)] = "UTC"
    all_day: StrictBool = False
    start: Instant
    end: Instant
    location: Annotated[str, StringConstraints(max_length=LOCATION_MAX), STORABLE] | None = None
    description: Annotated[str, StringConstraints(max_length=DESCRIPTION_MAX), STORABLE] | None = None
    attendees: tuple[Email, ...] = Field(default=(), max_length=500)

    @field_validator("time_zone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        try:
            if value in _MACHINE_ZONES:
                raise ValueError(value)
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown IANA time zone {value!r}") from None
        return value

    @field_validator("attendees")
    @classmethod
    def _unique_attendees(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        first_spelling: dict[str, str] = {}
        for email in value:
            first_spelling.setdefault(email.lower(), email)
        return tuple(first_spelling.values())

    @field_validator("start", "end", mode="before")
    @classmethod
    def _parse_times(cls, value: Any, info: ValidationInfo) -> Any:
        all_day = bool(info.data.get("all_day", False))
        if isinstance(value, str):
            value = _parse_instant(value, all_day=all_day)
        elif not isinstance(value, dt.date):  # a Python caller may give a date or datetime
            raise ValueError("must be a string: an ISO 8601 date-time, or a date for all-day events")
        if "time_zone" not in info.data:
            return value  # the time_zone validator reports the real problem
        return within_years(value, ZoneInfo(info.data["time_zone"]))

    @model_validator(mode="after")
    def _ordered(self) -> EventFields:
        if {isinstance(self.start, dt.datetime), isinstance(self.end, dt.datetime)} != {not self.all_day}:
            if self.all_day:
                raise ValueError("all-day events take dates (YYYY-MM-DD) for start and end")
            raise ValueError("timed events take date-times for start and end (or set all_day)")
        if self.end <= self.start:
            raise ValueError("end must be after start" + (" (all-day end dates are exclusive)" if self.all_day else ""))
        return self


# Names ZoneInfo reads from the machine, not IANA zones: they would mean other times on other machines.
_MACHINE_ZONES = frozenset({"localtime", "posixrules"})


def _parse_instant(raw: str, *, all_day: bool) -> dt.date | dt.datetime:
    try:
        if not re.fullmatch(DATE_PATTERN if all_day else DATE_TIME_PATTERN, raw):
            raise ValueError(raw)
        return dt.date.fromisoformat(raw) if all_day else dt.datetime.fromisoformat(raw)
    except ValueError:
        kind = "date (YYYY-MM-DD)" if all_day else "ISO 8601 date-time"
        raise ValueError(f"not a valid {kind}: {raw!r}") from None


class Change(BaseModel):
    """One producer request: create/update or delete an event and say where it must appear."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        json_schema_extra={
            "allOf": [
                {
                    "if": {"properties": {"operation": {"const": "upsert"}}},
                    "then": {"required": ["event"], "properties": {"event": {"type": "object"}}},
                },
                {
                    "if": {"properties": {"operation": {"const": "delete"}}},
                    "then": {"required": ["entity_id"], "properties": {"entity_id": {"type": "string"}}},
                },
            ]
        },
    )

    entity_id: Identifier | None = None
    operation: Literal["upsert", "delete"]
    event: EventFields | None = None
    accounts: tuple[Identifier, ...] | None = Field(default=None, min_length=1, max_length=100)
    send_updates: SendUpdates | None = None

    @field_validator("accounts")
    @classmethod
    def _unique_accounts(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        return tuple(dict.fromkeys(value)) if value is not None else None

    @model_validator(mode="after")
    def _consistent(self) -> Change:
        if self.operation == "upsert" and self.event is None:
            raise ValueError("event is required for an upsert")
        if self.operation == "delete" and self.entity_id is None:
            raise ValueError("entity_id is required for a delete")
        return self


def parse_change(data: Any) -> Change:
    """Validate a change, turning pydantic's report into one InvalidChange naming each bad field."""
    if isinstance(data, Change):
        return data
    try:
        return Change.model_validate(data)
    except ValidationError as exc:
        raise InvalidChange(describe_validation_error(exc)) from None

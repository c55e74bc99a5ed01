"""What other services submit: a change to one calendar event, validated before anything is saved.

A change file / ``submit_change`` argument looks like::

    {"entity_id": "evt_1" (optional: absent = new event),
     "operation": "upsert" | "delete",
     "event": {"title", "start", "end", "time_zone", "all_day", "location", "description", "attendees"},
     "accounts": ["acc_1", ...]  (the full set of accounts the event must appear in; optional on updates),
     "send_updates": "all" | "external_only" | "none"}

Timed events take ISO 8601 date-times (naive ones are read in ``time_zone``); all-day events take
dates, with ``end`` exclusive as in iCalendar and Google Calendar.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from calsync.core.model.calendar import SendUpdates
from calsync.core.model.errors import InvalidChange
from calsync.core.model.ids import Identifier

Email = Annotated[str, StringConstraints(pattern=r"^[^@\s]+@[^@\s]+\.[^@\s]+$", max_length=320)]


class EventFields(BaseModel):
    """The business fields of an event, as a producer states them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    title: Annotated[str, StringConstraints(min_length=1, max_length=1024)]
    # time_zone and all_day come before start/end: the time validators read them.
    time_zone: str = "UTC"
    all_day: bool = False
    start: dt.datetime | dt.date
    end: dt.datetime | dt.date
    location: Annotated[str, StringConstraints(max_length=1024)] | None = None
    description: Annotated[str, StringConstraints(max_length=16384)] | None = None
    attendees: tuple[Email, ...] = Field(default=(), max_length=500)

    @field_validator("time_zone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        try:
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
        if not isinstance(value, str):
            return value
        all_day = bool(info.data.get("all_day", False))
        return _parse_instant(str(info.field_name), value, all_day=all_day, zone_name=info.data.get("time_zone", "UTC"))

    @model_validator(mode="after")
    def _ordered(self) -> EventFields:
        if self.all_day:
            if isinstance(self.start, dt.datetime) or isinstance(self.end, dt.datetime):
                raise ValueError("all-day events take dates (YYYY-MM-DD) for start and end")
            if self.end <= self.start:
                raise ValueError("end must be after start (all-day end dates are exclusive)")
        else:
            if not isinstance(self.start, dt.datetime) or not isinstance(self.end, dt.datetime):
                raise ValueError("timed events take date-times for start and end (or set all_day)")
            if self.end <= self.start:
                raise ValueError("end must be after start")
        return self


def _parse_instant(name: str, raw: str, *, all_day: bool, zone_name: str) -> dt.date | dt.datetime:
    try:
        if all_day:
            return dt.date.fromisoformat(raw)
        value = dt.datetime.fromisoformat(raw)
    except ValueError:
        kind = "date (YYYY-MM-DD)" if all_day else "ISO 8601 date-time"
        raise ValueError(f"not a valid {kind}: {raw!r}") from None
    try:
        zone = ZoneInfo(zone_name)
    except (ZoneInfoNotFoundError, ValueError):
        return value  # the time_zone validator reports the real problem
    return value.replace(tzinfo=zone) if value.tzinfo is None else value.astimezone(zone)


class Change(BaseModel):
    """One producer request: create/update or delete an event and say where it must appear."""

    model_config = ConfigDict(extra="forbid", frozen=True)

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


def describe_validation_error(exc: ValidationError) -> str:
    """``field.path: message; ...`` — short enough for a one-line CLI error, precise enough to fix the input."""
    parts = []
    for err in exc.errors():
        location = ".".join(str(p) for p in err["loc"]) or "(root)"
        message = err["msg"].removeprefix("Value error, ")
        parts.append(f"{location}: {message}")
    return "; ".join(parts)

"""How the Google emulator behaves where Google varies, is silent, or a test wants it stricter (``/_emulator/config``).

Every field is a choice the tests can flip; the defaults are the documented (or, where Google is silent,
the most plausible) behaviour, and each says which:

- ``error_style``: the body shape of every error the emulator answers (fault rules may override it);
  default ``documented`` (Google's errors page);
- ``strict``: a test-only mode that answers 400 for a request field the discovery schema does not know,
  so a client's typo fails in tests; Google drops such fields (inferred from its answers, which carry schema
  fields only), as the emulator does by default;
- ``deleted_writes``: PUT/PATCH of a cancelled event either ``restore`` it (the "undelete" reported to work)
  or are refused with 403 ``forbidden`` (``forbidden``, as reported in google-api-ruby-client #1811 for an
  event deleted in the web UI); Google documents neither (inferred);
- ``sync_token_lifetime``: seconds a ``nextSyncToken`` stays valid, after which it answers 410
  ``fullSyncRequired``; Google documents that tokens expire, not when (chosen: one day);
- ``cancelled_retention``: seconds a cancelled event keeps its body before it is reduced to
  ``kind``/``etag``/``id``/``status``/``updated`` (Google: deleted events "are only guaranteed to have the id
  field populated"); ``None`` keeps the body (the organizer's copy keeps its details, documented);
- ``cancelled_forget_after``: seconds after which a cancelled event is forgotten altogether (GET answers 404,
  its id is free, sync tokens older than its deletion answer 410); Google says cancelled events "will
  eventually disappear" (documented) but not when; ``None`` never forgets;
- ``calendar_time_zone``: the time zone of every calendar, used to render times whose event has none;
- ``page_limit``: the most items one ``events.list`` page carries, whatever ``maxResults`` asks (Google: "the
  number of events in the resulting page may be less than this value ... even if there are more events
  matching the query", documented), so a test can make a client walk pages; ``None`` honours ``maxResults``.
"""

from __future__ import annotations

import zoneinfo
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from calsync_emulators.google.errors import ErrorStyle

DeletedWrites = Literal["restore", "forbidden"]

DEFAULT_SYNC_TOKEN_LIFETIME = 86400.0


class GoogleBehaviour(BaseModel):
    """The emulator's behaviour switches; posted (partially) to ``/_emulator/config``."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    error_style: ErrorStyle = "documented"
    strict: bool = False
    deleted_writes: DeletedWrites = "restore"
    sync_token_lifetime: float = Field(default=DEFAULT_SYNC_TOKEN_LIFETIME, ge=0)
    cancelled_retention: float | None = Field(default=None, ge=0)
    cancelled_forget_after: float | None = Field(default=None, ge=0)
    calendar_time_zone: str = "UTC"
    page_limit: int | None = Field(default=None, ge=1)

    @field_validator("calendar_time_zone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        try:
            zoneinfo.ZoneInfo(value)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f"unknown time zone {value!r}") from exc
        return value

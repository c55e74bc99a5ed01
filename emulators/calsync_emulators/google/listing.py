"""``events.list``: filters, order, pages, and incremental sync with ``syncToken`` / ``nextSyncToken``.

Documented (the discovery document's parameter descriptions and the "Synchronize resources efficiently"
guide): ``nextSyncToken`` only on the last page (``nextPageToken`` on the others); a ``syncToken`` list returns
only what changed since, deleted events always included, and refuses ``showDeleted=false``; ``iCalUID``,
``orderBy``, ``privateExtendedProperty``, ``q``, ``sharedExtendedProperty``, ``timeMin``, ``timeMax`` and
``updatedMin`` cannot be combined with it; an expired token answers 410 ``fullSyncRequired``; ``updatedMin``
includes deleted events regardless of ``showDeleted`` and may answer 410 ``updatedMinTooLongAgo``;
``timeMin`` bounds the end and ``timeMax`` the start (both exclusive), and timeMin must be smaller than
timeMax (else 400 ``timeRangeEmpty``, the errors page); ``orderBy=startTime`` needs ``singleEvents=true``;
``q`` searches summary, description, location, attendees' and the organizer's email and displayName;
``privateExtendedProperty``/``sharedExtendedProperty`` may repeat.

Inferred or chosen: the 400 for a forbidden combination is ``invalid`` naming the parameter; a garbage token
and a token of another calendar answer 410 like an expired one; a token older than a forgotten deletion
answers 410 (the deletion could no longer be reported); ``updatedMin`` before the forget horizon
(``cancelled_forget_after``) is "too long ago"; every last page carries a ``nextSyncToken``, whatever the
filters; repeated extended-property filters must all match (Google's pages contradict each other);
``singleEvents`` does not expand recurring events (the emulator stores ``recurrence`` but never expands it);
pages are an offset plus the position the first page was cut at.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from calsync_emulators.google.behaviour import GoogleBehaviour
from calsync_emulators.google.errors import ApiError
from calsync_emulators.google.events import Entry, EventStore, now_rfc3339
from calsync_emulators.google.times import instant, parse_when, query_time, zone_named

DEFAULT_PAGE_SIZE = 250
MAX_PAGE_SIZE = 2500
NOT_WITH_SYNC_TOKEN = (
    "iCalUID",
    "orderBy",
    "privateExtendedProperty",
    "q",
    "sharedExtendedProperty",
    "timeMin",
    "timeMax",
    "updatedMin",
)


@dataclass(frozen=True)
class _Token:
    calendar_id: str
    position: int
    issued_at: float


class SyncTokens:
    """The ``nextSyncToken`` values issued so far: which calendar, which change position, when."""

    def __init__(self) -> None:
        self._tokens: dict[str, _Token] = {}

    def reset(self) -> None:
        """Forget every token (each one then answers 410)."""
        self._tokens.clear()

    def issue(self, calendar_id: str, position: int) -> str:
        """A new opaque token for "everything up to ``position`` of ``calendar_id``"."""
        token = "CP" + secrets.token_urlsafe(18)
        self._tokens[token] = _Token(calendar_id, position, time.time())
        return token

    def position(self, token: str, calendar_id: str, lifetime: float, forgotten_upto: int) -> int:
        """The position a live token stands for, or 410 ``fullSyncRequired``."""
        found = self._tokens.get(token)
        if (
            found is None
            or found.calendar_id != calendar_id
            or time.time() - found.issued_at >= lifetime
            or found.position < forgotten_upto
        ):
            raise ApiError(410, "fullSyncRequired")
        return found.position


def _one(query: Mapping[str, list[str]], name: str) -> str | None:
    values = query.get(name)
    return values[-1] if values else None


def _flag(query: Mapping[str, list[str]], name: str) -> bool | None:
    value = _one(query, name)
    if value is None:
        return None
    if value.lower() not in ("true", "false"):
        raise ApiError(400, "invalid", f"Invalid value for: {name}", location=name)
    return value.lower() == "true"


def _page_token(raw: str | None, current: int) -> tuple[int, int]:
    if raw is None:
        return 0, current
    try:
        offset, _, position = base64.urlsafe_b64decode(raw.encode()).decode().partition(":")
        return int(offset), int(position)
    except (ValueError, binascii.Error, UnicodeDecodeError) as exc:
        raise ApiError(400, "invalid", "Invalid value for: pageToken", location="pageToken") from exc


def _searchable(resource: Mapping[str, Any]) -> str:
    people = [*(resource.get("attendees") or ()), resource.get("organizer") or {}]
    texts = [resource.get(k) or "" for k in ("summary", "description", "location")]
    texts += [str(p.get(k) or "") for p in people for k in ("email", "displayName")]
    return "\n".join(texts).casefold()


def _properties_match(resource: Mapping[str, Any], scope: str, constraints: list[str]) -> bool:
    properties = (resource.get("extendedProperties") or {}).get(scope) or {}
    return all(properties.get(k) == v for k, _, v in (c.partition("=") for c in constraints))


class Listing:
    """One ``events.list`` call, checked and answered."""

    def __init__(self, store: EventStore, tokens: SyncTokens, behaviour: GoogleBehaviour) -> None:
        self.store, self.tokens, self.behaviour = store, tokens, behaviour

    def answer(self, calendar_id: str, query: Mapping[str, list[str]]) -> dict[str, Any]:
        """The Events page for this query (raises :class:`ApiError` for what Google refuses)."""
        sync_token = _one(query, "syncToken")
        show_deleted = _flag(query, "showDeleted")
        if sync_token is not None:
            for name in NOT_WITH_SYNC_TOKEN:
                if name in query:
                    raise ApiError(400, "invalid", f"{name} cannot be combined with syncToken.", location=name)
            if show_deleted is False:
                raise ApiError(400, "invalid", "showDeleted=false cannot be combined with syncToken.", "showDeleted")
        try:
            size = min(
                int(_one(query, "maxResults") or DEFAULT_PAGE_SIZE),
                MAX_PAGE_SIZE,
                self.behaviour.page_limit or MAX_PAGE_SIZE,
            )
        except ValueError as exc:
            raise ApiError(400, "invalid", "Invalid value for: maxResults", location="maxResults") from exc
        offset, snapshot = _page_token(_one(query, "pageToken"), self.store.position)
        if size < 1 or offset < 0:
            raise ApiError(400, "invalid", "Invalid value for: maxResults or pageToken")
        keep = self._filter(calendar_id, query, sync_token, bool(show_deleted))
        matching = [entry for entry in self.store.entries(calendar_id) if keep(entry)]
        matching = self._ordered(matching, query)
        time_zone = _one(query, "timeZone")
        page: dict[str, Any] = {
            "kind": "calendar#events",
            "etag": f'"p{snapshot}"',
            "summary": calendar_id,
            "updated": now_rfc3339(),
            "timeZone": time_zone or self.behaviour.calendar_time_zone,
            "accessRole": "owner",
            "defaultReminders": [],
            "items": [self.store.present(e.resource, time_zone) for e in matching[offset : offset + size]],
        }
        if offset + size < len(matching):
            page["nextPageToken"] = base64.urlsafe_b64encode(f"{offset + size}:{snapshot}".encode()).decode()
        else:
            page["nextSyncToken"] = self.tokens.issue(calendar_id, snapshot)
        return page

    def _filter(
        self, calendar_id: str, query: Mapping[str, list[str]], sync_token: str | None, show_deleted: bool
    ) -> Callable[[Entry], bool]:
        forgotten = self.store.forgotten_upto.get(calendar_id, 0)
        since = None
        if sync_token is not None:
            since = self.tokens.position(sync_token, calendar_id, self.behaviour.sync_token_lifetime, forgotten)
        updated_min = self._updated_min(_one(query, "updatedMin"))
        time_min, time_max = (query_time(v, n) if (v := _one(query, n)) else None for n in ("timeMin", "timeMax"))
        if time_min is not None and time_max is not None and time_max <= time_min:
            raise ApiError(400, "timeRangeEmpty")
        with_cancelled = show_deleted or since is not None or updated_min is not None
        ical_uid, text = _one(query, "iCalUID"), (_one(query, "q") or "").casefold()
        private, shared = query.get("privateExtendedProperty", []), query.get("sharedExtendedProperty", [])
        zone = zone_named(self.behaviour.calendar_time_zone, "the calendar")

        def keep(entry: Entry) -> bool:
            resource = entry.resource
            if entry.cancelled and not with_cancelled:
                return False
            if since is not None and entry.position <= since:
                return False
            if updated_min is not None and dt.datetime.fromisoformat(resource["updated"]) < updated_min:
                return False
            if ical_uid is not None and resource.get("iCalUID") != ical_uid:
                return False
            if text and text not in _searchable(resource):
                return False
            if not (_properties_match(resource, "private", private) and _properties_match(resource, "shared", shared)):
                return False
            if "start" in resource and (time_min is not None or time_max is not None):
                start = instant(parse_when(resource["start"], "start"), zone)
                end = instant(parse_when(resource["end"], "end"), zone)
                if (time_min is not None and end <= time_min) or (time_max is not None and start >= time_max):
                    return False
            return True

        return keep

    def _updated_min(self, raw: str | None) -> dt.datetime | None:
        if raw is None:
            return None
        moment = query_time(raw, "updatedMin")
        horizon = self.behaviour.cancelled_forget_after
        if horizon is not None and moment.timestamp() < time.time() - horizon:
            raise ApiError(410, "updatedMinTooLongAgo")
        return moment

    def _ordered(self, entries: list[Entry], query: Mapping[str, list[str]]) -> list[Entry]:
        order = _one(query, "orderBy")
        if order is None:
            return entries
        if order == "updated":
            return sorted(entries, key=lambda e: e.position)
        if order != "startTime":
            raise ApiError(400, "invalid", "Invalid value for: orderBy", location="orderBy")
        if not _flag(query, "singleEvents"):
            raise ApiError(
                400, "invalid", "The requested ordering is not available for the particular query.", location="orderBy"
            )
        zone = zone_named(self.behaviour.calendar_time_zone, "the calendar")
        latest = dt.datetime.max.replace(tzinfo=dt.UTC)
        return sorted(
            entries,
            key=lambda e: instant(parse_when(e.resource["start"], "start"), zone) if "start" in e.resource else latest,
        )

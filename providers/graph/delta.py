"""Reading a Graph calendar back for drift (core/model/drift.py): calendarView delta, then our marker by id.

Graph's rules (Microsoft's "event: delta" and "delta query" documentation) and what the reader does about them:

- ``calendarView/delta`` is the only change feed of v1.0 and needs a window (``startDateTime``/``endDateTime``),
  baked into its tokens. The reader's window runs from :data:`WINDOW_PAST` before the day the round started to
  :data:`WINDOW_FUTURE` after it; a cursor whose window is older than :data:`WINDOW_REFRESH` starts a new full
  listing, so the window rolls forward (the cursor is ``<window day>;<deltaLink>``).
- Delta supports no ``$expand`` (nor ``$select``/``$filter``), so its items never carry calsync's marker: each
  changed id is read once more with ``$expand`` of the marker (``GET events/{id}``); events without it (the
  user's own) are dropped there. ``@removed`` also covers events that merely left the window, so a removal is
  confirmed the same way: only a 404 ``ErrorItemNotFound`` reports it removed (with no sync key: Graph says
  nothing more); any other 404 (a mailbox gone or without REST) fails the read-back like any error.
  An unchanged calendar is the one delta request.
- The deltaLink is followed only on the configured API endpoint (a cursor naming another host is read as no
  cursor: the token must never go elsewhere). 410 Gone on it (``SyncStateNotFound``, ``resyncRequired``: the
  token expired or is unknown) → one full listing, ``full=True``.
- A full listing is a new delta round (its items are not needed, only the deltaLink at its end), then the
  calendar's events listed with the marker expanded, following ``@odata.nextLink``: the window of the delta
  round does not limit what a full listing can call missing. The round comes first, so a change made while
  listing is seen again by the next sweep rather than lost.
- Every request asks for UTC times and text bodies (``Prefer: outlook.timezone``, ``outlook.body-content-type``)
  and pages of :data:`PAGE_SIZE`; failures are raised as the adapter's other calls raise them.
- ``fingerprint``: the body ``upsert`` would send (event_body.py) and an event read, through
  :func:`calsync.providers.fingerprint.owned_fingerprint`: timed times as UTC instants, all-day events as their
  first and last day (Graph's all-day end is exclusive), attendees only when the event's ``send_updates`` lets
  calsync write them.
"""

from __future__ import annotations

import datetime as dt
import zoneinfo
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote

import httpx

from calsync.core.model.calendar import EventState
from calsync.core.model.drift import ObservedItem, ReadBack
from calsync.core.model.errors import TemporaryError
from calsync.core.model.markers import GRAPH_SYNC_KEY_PROPERTY_ID
from calsync.providers.fingerprint import owned_fingerprint
from calsync.providers.graph.classification import GraphHttpError
from calsync.providers.graph.event_body import event_body, marker_of

WINDOW_PAST = dt.timedelta(days=366)
WINDOW_FUTURE = dt.timedelta(days=3 * 366)
WINDOW_REFRESH = dt.timedelta(days=30)
PAGE_SIZE = 100
PREFER = (
    f'IdType="ImmutableId", outlook.timezone="UTC", outlook.body-content-type="text", odata.maxpagesize={PAGE_SIZE}'
)
EXPAND = f"singleValueExtendedProperties($filter=id eq '{GRAPH_SYNC_KEY_PROPERTY_ID}')"
ITEM_NOT_FOUND = "ErrorItemNotFound"
_SELECT = "subject,body,location,start,end,isAllDay,attendees"


#: The adapter's one API call, bound to a session (``GraphProvider._send``: a mailbox slot, one token refresh on 401,
#: non-2xx raised as GraphHttpError).
Send = Callable[..., httpx.Response]


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _moment(value: Any, all_day: bool) -> dt.datetime | dt.date | None:
    if not isinstance(value, Mapping) or not isinstance(value.get("dateTime"), str):
        return None
    text = value["dateTime"][:19]  # Graph writes seven fractional digits, Python reads six
    if all_day:
        return dt.date.fromisoformat(text[:10])
    zone_name = str(value.get("timeZone") or "UTC")
    try:
        zone: dt.tzinfo = dt.UTC if zone_name.upper() == "UTC" else zoneinfo.ZoneInfo(zone_name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        zone = dt.UTC  # a Windows zone name: asked for UTC, so only an odd server sends one
    return dt.datetime.fromisoformat(text).replace(tzinfo=zone)


def _fingerprint_of(event: Mapping[str, Any]) -> str:
    all_day = bool(event.get("isAllDay"))
    start, end = _moment(event.get("start"), all_day), _moment(event.get("end"), all_day)
    if all_day and isinstance(end, dt.date) and isinstance(start, dt.date):
        end = max(start, end - dt.timedelta(days=1))  # exclusive end; end == start is one day
    people = event.get("attendees") or ()
    attendees = [str(_mapping(_mapping(a).get("emailAddress")).get("address") or "") for a in people]
    return owned_fingerprint(title=event.get("subject"), start=start, last=end, all_day=all_day,
                             location=_mapping(event.get("location")).get("displayName"),
                             description=_mapping(event.get("body")).get("content"), attendees=attendees)  # fmt: skip


def fingerprint(event: EventState) -> str:
    """The owned fields of what ``upsert`` writes for ``event`` (a create's body: attendees only when sent)."""
    return _fingerprint_of(event_body(event, "", event.send_updates, create=True))


class Reader:
    """One read-back of one calendar: ``user`` is the adapter's ``users/{address}`` path, ``calendar`` the id of
    the calendar events are written to (None: the primary one)."""

    def __init__(self, send: Send, base: str, user: str, calendar: str | None, now: dt.datetime) -> None:
        self._send, self._base, self._user, self._now = send, base, user, now
        self._calendar = f"{user}/calendars/{quote(calendar, safe='')}" if calendar else f"{user}/calendar"

    def read_back(self, cursor: str | None) -> ReadBack:
        """The marked events changed since ``cursor`` (all when None, refused, stale or foreign), and the next one."""
        resumed = self._resume(cursor)
        if resumed is not None:
            day, link = resumed
            try:
                changed, delta_link = self._delta_round(link, None)
            except GraphHttpError as exc:
                if exc.status != 410:
                    raise
            else:
                return ReadBack(items=self._confirm(changed), cursor=f"{day};{delta_link}", full=False)
        day = self._now.date().isoformat()
        window = {"startDateTime": (self._now - WINDOW_PAST).strftime("%Y-%m-%dT00:00:00Z"),
                  "endDateTime": (self._now + WINDOW_FUTURE).strftime("%Y-%m-%dT00:00:00Z")}  # fmt: skip
        _, delta_link = self._delta_round(f"{self._calendar}/calendarView/delta", window)
        return ReadBack(items=self._listing(), cursor=f"{day};{delta_link}", full=True)

    def _delta_round(self, path: str, params: Mapping[str, str] | None) -> tuple[list[dict[str, Any]], str]:
        """Every page of one delta round from ``path``: its items and the deltaLink that ends it."""
        items: list[dict[str, Any]] = []
        while True:
            page = self._send("GET", path, params=params, headers={"Prefer": PREFER}).json()
            items += [i for i in page.get("value") or () if isinstance(i, dict)]
            if page.get("@odata.deltaLink"):
                return items, str(page["@odata.deltaLink"])
            path, params = self._relative(str(page.get("@odata.nextLink") or "")), None

    def _relative(self, link: str) -> str:
        """A link Graph returned, below the API endpoint (a link elsewhere would take our token with it)."""
        if not link.startswith(self._base):
            raise TemporaryError(f"Graph returned a paging link outside {self._base}: {link[:80]!r}")
        return link[len(self._base) :]

    def _resume(self, cursor: str | None) -> tuple[str, str] | None:
        """(window day, deltaLink relative to the API endpoint) of a cursor still worth following."""
        day, _, link = (cursor or "").partition(";")
        try:
            started = dt.date.fromisoformat(day)
        except ValueError:
            return None
        if not link.startswith(self._base) or self._now.date() - started > WINDOW_REFRESH:
            return None
        return day, link[len(self._base) :]

    def _listing(self) -> list[ObservedItem]:
        """Every event of the calendar that carries calsync's marker."""
        found: list[ObservedItem] = []
        path: str = f"{self._calendar}/events"
        params: Mapping[str, str] | None = {"$expand": EXPAND, "$select": _SELECT}
        while path:
            page = self._send("GET", path, params=params, headers={"Prefer": PREFER}).json()
            found += [o for o in map(self._observed, page.get("value") or ()) if o is not None]
            link = page.get("@odata.nextLink")
            path, params = (self._relative(str(link)) if link else ""), None
        return found

    def _confirm(self, changed: list[dict[str, Any]]) -> list[ObservedItem]:
        """Each changed or removed id read again with the marker: ours as they are now, or removed when gone."""
        found: list[ObservedItem] = []
        for event_id in dict.fromkeys(str(i["id"]) for i in changed if i.get("id")):
            try:
                event = self._send("GET", f"{self._user}/events/{quote(event_id, safe='')}", params={"$expand": EXPAND},
                                   headers={"Prefer": PREFER}).json()  # fmt: skip
            except GraphHttpError as exc:
                if (exc.status, exc.code or ITEM_NOT_FOUND) != (404, ITEM_NOT_FOUND):  # not a gone mailbox
                    raise
                found.append(ObservedItem(external_id=event_id, sync_key=None, etag=None, removed=True))
                continue
            observed = self._observed(event)
            if observed is not None:
                found.append(observed)
        return found

    @staticmethod
    def _observed(event: Any) -> ObservedItem | None:
        if not isinstance(event, Mapping) or (key := marker_of(event)) is None:
            return None
        return ObservedItem(external_id=str(event["id"]), sync_key=key, etag=event.get("@odata.etag"),
                            fingerprint=_fingerprint_of(event))  # fmt: skip

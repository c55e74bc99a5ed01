"""Graph ``calendarView/delta`` over the mailbox store's change log (event: delta, v1.0; delta query overview).

Documented behaviour kept: ``GET /users/{id}/calendarView/delta?startDateTime=…&endDateTime=…`` (also under
``calendar/`` and ``calendars/{id}/``) starts a round; the window and every other parameter are baked into the
state tokens, so later requests carry only ``$skiptoken`` (``@odata.nextLink``, more pages in this round) or
``$deltatoken`` (``@odata.deltaLink``, the round is complete: keep it for the next one); a page never holds both
links. The first round lists the events in the window as they are now (nothing deleted before it); a later
round lists what changed since: events in their current state, and ``{"@removed": {"reason": "deleted"}, "id"}``
for events deleted and for events that changed and are no longer in the window. ``Prefer: odata.maxpagesize=N``
bounds a page (``Preference-Applied`` says so). ``$select``, ``$expand``, ``$filter``, ``$orderby`` and
``$search`` are not supported on calendarView delta: a client that needs an extended property (calsync's marker)
must GET each changed event with ``$expand`` (or keep the immutable ids it already knows). An expired token
answers 410 Gone ``SyncStateNotFound`` and a token this server cannot read 410 ``resyncRequired``; both mean
"start a full synchronization", and a ``Location`` header points at a new first request of the same window when
the token says which window that was.

Inferred (not documented): the default page size (10, as calendarView's list); the 400 code for an
unsupported query option or a missing window (``ErrorInvalidUrlQuery``); which of the two 410 codes a case
gets; an event changed several times is reported once, in its latest state; tokens are ours (base64 JSON,
deterministic, so an unchanged calendar answers the same deltaLink); an event without times is never in a window;
links are absolute https URLs on the request's host (Graph is reached over TLS).
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any
from urllib.parse import quote, urlencode

from calsync_emulators.ews.mailbox import Item, MailboxStore, Tombstone, decode_state, encode_state
from calsync_emulators.ews.soap import parse_time
from calsync_emulators.graph.convert import graph_id, render
from calsync_emulators.graph.errors import GraphError, graph_error
from calsync_emulators.server import Request, Response

DEFAULT_PAGE_SIZE = 10
_UNSUPPORTED = ("$select", "$expand", "$filter", "$orderby", "$search")
_MAX_PAGE = re.compile(r"odata\.maxpagesize\s*=\s*(\d+)", re.IGNORECASE)
_EXPIRED = "The sync state generation is not found. The delta token is expired and data must be synchronized again."


def is_delta(parts: list[str]) -> bool:
    """Whether a path below ``/users/{id}/`` names calendarView delta."""
    lowered = [p.lower() for p in parts]
    return len(lowered) >= 2 and lowered[-2:] == ["calendarview", "delta"]


def _instant(text: str, name: str) -> dt.datetime:
    try:
        return parse_time(text)
    except ValueError:
        raise GraphError(400, "ErrorInvalidParameter", f"{name} is not a valid date-time.") from None


def _in_window(item: Item, start: dt.datetime, end: dt.datetime) -> bool:
    begins, ends = item.text("Start"), item.text("End")
    if not begins or not ends:
        return False
    return parse_time(begins) < end and parse_time(ends) > start


class DeltaFeed:
    """Answers calendarView delta requests of one mailbox from the store's change log."""

    def __init__(self, store: MailboxStore) -> None:
        self._store = store

    def serve(self, request: Request, mailbox: str, path: str) -> Response:
        """One page of a delta round; ``path`` is the request's path, the links' base."""
        for option in _UNSUPPORTED:
            if option in request.query:
                raise GraphError(400, "ErrorInvalidUrlQuery", f"The query parameter '{option}' is not supported "
                                 "with change tracking over the 'CalendarView' resource.")  # fmt: skip
        base = f"https://{request.header('Host') or 'localhost'}{path}"
        token = self._token(request)
        with self._store.lock:
            fields = self._first(request, mailbox) if token is None else self._resume(token, mailbox, base)
            return fields if isinstance(fields, Response) else self._page(request, mailbox, fields, base)

    @staticmethod
    def _token(request: Request) -> str | None:
        for name in ("$deltatoken", "$skiptoken"):
            values = request.query.get(name)
            if values:
                return values[-1]
        return None

    def _first(self, request: Request, mailbox: str) -> dict[str, Any]:
        start, end = (request.query.get(n, [""])[-1] for n in ("startDateTime", "endDateTime"))
        if not start or not end:
            raise GraphError(400, "ErrorInvalidParameter", "This request requires a time window specified by "
                             "the query string parameters StartDateTime and EndDateTime.")  # fmt: skip
        first, last = _instant(start, "startDateTime"), _instant(end, "endDateTime")
        return {"g": self._store.generation, "m": mailbox, "a": first.isoformat(), "b": last.isoformat(),
                "s": 0, "u": self._store.sequence(mailbox), "p": 0}  # fmt: skip

    def _resume(self, token: str, mailbox: str, base: str) -> dict[str, Any] | Response:
        fields = decode_state(token)
        numbers = ("s", "u", "p") if fields is not None and "u" in fields else ("s",)
        if (fields is None or fields.get("m") != mailbox or not {"a", "b"} <= set(fields)
                or not all(isinstance(fields.get(n), int) for n in numbers)):  # fmt: skip
            return graph_error(410, "resyncRequired", "The delta token is not valid; synchronize again.")
        if "u" not in fields:  # a deltaLink: a new round of the changes since the last one ended
            fields = {**fields, "u": self._store.sequence(mailbox), "p": fields["s"]}
        # A first round needs no tombstone; a later one needs every tombstone after the page it resumes from.
        alive = fields["s"] == 0 or self._store.valid_since(mailbox, int(fields["p"]))
        if fields.get("g") != self._store.generation or not alive:
            answer = graph_error(410, "SyncStateNotFound", _EXPIRED)
            window = {"startDateTime": fields["a"], "endDateTime": fields["b"]}
            answer.headers["Location"] = f"{base}?{urlencode(window, quote_via=quote)}"
            return answer
        return fields

    def _page(self, request: Request, mailbox: str, fields: dict[str, Any], base: str) -> Response:
        start, end = dt.datetime.fromisoformat(fields["a"]), dt.datetime.fromisoformat(fields["b"])
        since, upto, after = int(fields["s"]), int(fields["u"]), int(fields["p"])
        changes = self._store.changes_since(mailbox, after)
        items = [i for i in changes.items if i.changed_seq <= upto and (since or _in_window(i, start, end))]
        entries: list[tuple[int, Item | Tombstone]] = [(i.changed_seq, i) for i in items]
        if since:  # a later round also reports deletions; the first lists the window as it is
            entries += [(t.seq, t) for t in changes.deleted if t.seq <= upto]
        entries.sort(key=lambda e: e[0])
        size = self._page_size(request)
        page, more = entries[:size], len(entries) > size
        value = [self._entry(entry, start, end) for _, entry in page]
        if more:
            link = {"@odata.nextLink": f"{base}?$skiptoken={encode_state({**fields, 'p': page[-1][0]})}"}
        else:
            state = {"g": fields["g"], "m": mailbox, "a": fields["a"], "b": fields["b"], "s": upto}
            link = {"@odata.deltaLink": f"{base}?$deltatoken={encode_state(state)}"}
        headers = {} if request.header("Prefer") is None or not _MAX_PAGE.search(request.header("Prefer") or "") else {
            "Preference-Applied": f"odata.maxpagesize={size}"}  # fmt: skip
        answer = Response.json(200, {"@odata.context": "$metadata#Collection(event)", "value": value, **link}, headers)
        answer.log = {"delta": "first" if since == 0 else "changes", "changes": len(page), "more": more}
        return answer

    @staticmethod
    def _page_size(request: Request) -> int:
        match = _MAX_PAGE.search(request.header("Prefer") or "")
        return max(1, int(match.group(1))) if match else DEFAULT_PAGE_SIZE

    @staticmethod
    def _entry(entry: Item | Tombstone, start: dt.datetime, end: dt.datetime) -> dict[str, Any]:
        if isinstance(entry, Item) and _in_window(entry, start, end):
            return render(entry)
        return {"@odata.type": "#microsoft.graph.event", "id": graph_id(entry.id), "@removed": {"reason": "deleted"}}

"""Reading an account's calendar back for drift sweeps (core/model/drift.py): the listing and the fingerprints.

The listing. calsync's marker is the private property ``calsyncKey=<the target's sync key>``: one value per
target. Google's ``privateExtendedProperty`` filter matches ``name=value`` only, so it cannot ask for "every
event that has a calsyncKey", and it cannot be combined with ``syncToken`` at all (the discovery document),
while the sync guide asks an incremental list to repeat the full listing's other parameters. So both listings
are the same query, ``events.list(showDeleted=true, maxResults=2500)`` with a partial response (``fields``: what
is read here), the incremental one with ``syncToken``, and calsync's items are picked here by their marker: the
full listing pays for the user's own events once (on the first sweep and after a 410), every later sweep only
for what changed, one request when nothing did.
``showDeleted=true`` on both: a syncToken list always includes deleted events and refuses ``showDeleted=false``,
and in a full listing a cancelled item of ours is then seen as removed, not as missing.

Cancelled items: an item whose body Google kept carries our marker or is not ours (dropped); a reduced one
(deleted events "are only guaranteed to have the id field populated", so no ``start``) may be ours and is kept
as removed without a sync key, to be matched by its id. A 410 on the incremental list (``fullSyncRequired``,
classified as :class:`FullSyncRequired`) leads to one full listing; any other failure is raised as the
classification table says, and nothing is returned from a listing that did not reach its last page.

The fingerprint of an item read is :func:`~calsync.providers.google.event_body.fingerprint_of`, the function that
also reduces the body ``event_body`` writes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from typing import Any, Final

from calsync.core.model.drift import ObservedItem, ReadBack
from calsync.core.model.errors import FullSyncRequired
from calsync.providers.google.event_body import SYNC_KEY_PROPERTY, fingerprint_of, private_properties

#: Google's largest page ("can never be larger than 2500"): a calendar of up to 2,500 items is one request.
PAGE_SIZE: Final = 2500
#: A partial response: what ``observed`` reads and nothing else (a listed event is several times larger).
LIST_FIELDS: Final = (
    "nextPageToken,nextSyncToken,items(id,etag,status,summary,description,location,start,end,"
    "attendees(email,self,organizer),extendedProperties/private)"
)
LIST_PARAMETERS: Final[Mapping[str, Any]] = {"showDeleted": True, "maxResults": PAGE_SIZE, "fields": LIST_FIELDS}

#: ``events.list`` of the account's calendar with these parameters, classified (``GoogleProvider._execute``).
ListPage = Callable[..., Mapping[str, Any]]


def read_back(list_page: ListPage, owner: str, cursor: str | None) -> ReadBack:
    """The marked items changed since the sync token ``cursor``, or all of them (``full``) without one or on 410."""
    if cursor is not None:
        with contextlib.suppress(FullSyncRequired):
            return ReadBack(*_listing(list_page, owner, cursor), full=False)
    return ReadBack(*_listing(list_page, owner, None), full=True)


def _listing(list_page: ListPage, owner: str, sync_token: str | None) -> tuple[list[ObservedItem], str | None]:
    """Every page of one listing; the cursor is the last page's ``nextSyncToken`` (None if Google gave none)."""
    items: list[ObservedItem] = []
    page_token: str | None = None
    while True:
        extra = {"syncToken": sync_token} if sync_token is not None else {}
        page = list_page(**LIST_PARAMETERS, **extra, **({"pageToken": page_token} if page_token else {}))
        for item in page.get("items") or ():
            if isinstance(item, Mapping) and (seen := observed(item, owner)) is not None:
                items.append(seen)
        next_page = page.get("nextPageToken")
        if not isinstance(next_page, str) or not next_page:
            token = page.get("nextSyncToken")
            return items, token if isinstance(token, str) and token else None
        page_token = next_page


def observed(item: Mapping[str, Any], owner: str) -> ObservedItem | None:
    """One listed item as a sweep sees it, or None when it is not (or cannot be) one of calsync's."""
    event_id, etag = item.get("id"), item.get("etag")
    if not isinstance(event_id, str) or not event_id:
        return None
    marker = private_properties(item).get(SYNC_KEY_PROPERTY)
    sync_key = marker if isinstance(marker, str) and marker else None
    etag = etag if isinstance(etag, str) else None
    if item.get("status") == "cancelled":
        if sync_key is None and "start" in item:
            return None  # a deleted event with its body kept and no marker: the user's own
        return ObservedItem(event_id, sync_key, etag, removed=True)
    if sync_key is None:
        return None
    return ObservedItem(event_id, sync_key, etag, fingerprint=fingerprint_of(item, owner))

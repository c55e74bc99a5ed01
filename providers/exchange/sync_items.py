"""Reading an Exchange calendar back for drift (core/model/drift.py): SyncFolderItems, then GetItem for our items.

- One ``SyncFolderItems`` round on the calendar folder (exchangelib's ``FolderCollection.sync_items``, pages of
  up to 512 changes until ``IncludesLastItemInRange``), asking only for our sync-key property: the ChangeKey comes
  with every ItemId. An unchanged calendar is that one request. The cursor is the ``SyncState`` it ends with.
  The folder collection is built per call: ``Folder.sync_items`` would keep the state on the shared folder
  object and reuse it when none is given, so a full listing could silently become an incremental one.
- ``SyncFolderItems`` cannot return ``Body`` (Exchange's documentation: use GetItem), so the created and updated
  items that carry our marker are fetched once more, in one ``GetItem`` batch, for the fields calsync owns; the
  user's other items cost nothing more. An item gone in between is reported removed.
- A ``Delete`` change carries an ItemId only: it is reported removed, with no sync key.
- ``ErrorInvalidSyncStateData`` for a stored state (invalid or expired) → one full listing (no state), which
  says so with ``full=True``. Without a cursor the listing is full from the start.
- ``fingerprint`` reduces what :func:`~calsync.providers.exchange.items.item_fields` writes and what GetItem
  reads through :func:`calsync.providers.fingerprint.owned_fingerprint`: exchangelib reads an all-day item's
  start and end as dates (the end already made inclusive), and writes them as midnights, end exclusive.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

from exchangelib.errors import ErrorInvalidSyncStateData, ErrorItemNotFound
from exchangelib.folders import FolderCollection
from exchangelib.folders.collections import SyncCompleted

from calsync.core.model.calendar import EventState
from calsync.core.model.drift import ObservedItem, ReadBack
from calsync.providers.exchange.items import UPDATE_FIELDS, item_fields
from calsync.providers.fingerprint import owned_fingerprint

MAX_CHANGES = 512  # SyncFolderItems' ceiling per call
SYNC_KEY_FIELD = "calsync_sync_key"
OWNED_FIELDS = (*UPDATE_FIELDS, SYNC_KEY_FIELD)


def _fingerprint_of(fields: Mapping[str, Any], *, written: bool) -> str:
    """The owned ``fields`` (named as CalendarItem's) of an item ``written`` by ``upsert`` or read back."""
    all_day, end, attendees = bool(fields["is_all_day"]), fields["end"], fields["required_attendees"]
    if all_day and written and end is not None:
        end = (end - dt.timedelta(days=1)).date()  # written: midnight after the last day
    return owned_fingerprint(
        title=fields["subject"],
        start=fields["start"],
        last=end,
        all_day=all_day,
        location=fields["location"],
        description=None if fields["body"] is None else str(fields["body"]),
        attendees=[a.mailbox.email_address or "" for a in attendees or () if a.mailbox is not None],
    )


def fingerprint(event: EventState) -> str:
    """The owned fields of what ``upsert`` writes for ``event``."""
    return _fingerprint_of(item_fields(event), written=True)


def _observed(item: Any) -> ObservedItem:
    return ObservedItem(
        external_id=item.id,
        sync_key=getattr(item, SYNC_KEY_FIELD),
        etag=item.changekey,
        fingerprint=_fingerprint_of({name: getattr(item, name) for name in UPDATE_FIELDS}, written=False),
    )


def _sync(account: Any, calendar: Any, state: str | None) -> tuple[list[tuple[str, Any]], str]:
    """Every change since ``state`` (all items without one) and the state to resume from."""
    changes: list[tuple[str, Any]] = []
    collection = FolderCollection(account=account, folders=[calendar])
    try:
        for change in collection.sync_items(
            sync_state=state, only_fields=[SYNC_KEY_FIELD], max_changes_returned=MAX_CHANGES
        ):
            changes.append(change)
    except SyncCompleted as done:
        return changes, done.sync_state
    raise AssertionError("exchangelib's sync_items ends with SyncCompleted")


def read_back(account: Any, calendar: Any, cursor: str | None) -> ReadBack:
    """The marked items changed since ``cursor`` (all of them when None or refused) and the next SyncState."""
    full = cursor is None
    try:
        changes, state = _sync(account, calendar, cursor)
    except ErrorInvalidSyncStateData:
        if full:
            raise
        full = True
        changes, state = _sync(account, calendar, None)
    removed: list[ObservedItem] = []
    marked: list[Any] = []
    for kind, item in changes:
        if kind == "delete":
            removed.append(ObservedItem(external_id=item.id, sync_key=None, etag=None, removed=True))
        elif kind in ("create", "update") and getattr(item, SYNC_KEY_FIELD, None):
            marked.append(item)
    return ReadBack(items=[*removed, *_fetch(account, calendar, marked)], cursor=state, full=full)


def _fetch(account: Any, calendar: Any, items: Sequence[Any]) -> list[ObservedItem]:
    if not items:
        return []
    # The folder validates only_fields; without it exchangelib resolves the mailbox's root first (a GetFolder).
    found = account.fetch(ids=[(i.id, i.changekey) for i in items], folder=calendar, only_fields=list(OWNED_FIELDS))
    observed = []
    for asked, item in zip(items, found, strict=True):
        if isinstance(item, ErrorItemNotFound):  # gone since the sync (exchangelib yields it as a value)
            observed.append(ObservedItem(external_id=asked.id, sync_key=None, etag=None, removed=True))
        elif isinstance(item, Exception):
            raise item
        else:
            observed.append(_observed(item))
    return observed

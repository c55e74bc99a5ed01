"""The EWS emulator's mailbox store: calendar items with ItemId and ChangeKey, stored as the client sent them.

Exchange behaviour kept (documented, and verified with exchangelib): a new ChangeKey on every change, the
same ItemId for the life of an item, End before Start refused. Our choices: the id format (base64 of a
prefix and a UUID, so a foreign id is recognisably malformed) and the ChangeKey counter.

The change log behind EWS ``SyncFolderItems`` and Graph's ``calendarView/delta``: each mailbox numbers its
changes (create, change, delete: whichever front end or control route made them, since all go through
:meth:`MailboxStore.add`, :meth:`~MailboxStore.changed` and :meth:`~MailboxStore.remove`); an item remembers the
sequence of its creation and of its last change, a deleted item leaves a tombstone. Inferred (neither vendor
documents its retention): tombstones are kept for the last ``tombstone_limit`` deletions of a mailbox, and a
sync state older than a forgotten tombstone is refused, as an expired token is; ``expire_sync_states`` voids
every state issued so far (a server that lost its sync data).
"""

from __future__ import annotations

import base64
import binascii
import json
import threading
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from calsync_emulators.ews.soap import EwsError, T, parse_time

_ITEM_ID_PREFIX = b"calsync-ews-emulator:"
_SENDING_MODES = {"SendOnlyToAll", "SendToAllAndSaveCopy", "SendOnlyToChanged", "SendToChangedAndSaveCopy"}
_EDITABLE = (("subject", "Subject"), ("location", "Location"), ("body", "Body"), ("start", "Start"), ("end", "End"))
DEFAULT_TOMBSTONE_LIMIT = 1000


@dataclass
class Item:
    """One calendar item: its fields and extended properties as XML elements."""

    id: str
    mailbox: str
    change_key: str
    fields: dict[str, ET.Element] = field(default_factory=dict)
    extended: dict[str, ET.Element] = field(default_factory=dict)
    transaction_id: str | None = None  # Graph's create dedup key, with a digest of the create it came with
    created_from: str | None = None
    created_seq: int = 0  # the mailbox's change sequence at creation and at the last change (the change log)
    changed_seq: int = 0

    def text(self, name: str) -> str | None:
        """A field's text ('' when empty, None when absent)."""
        elem = self.fields.get(name)
        return None if elem is None else (elem.text or "")

    def attendees(self, name: str) -> list[str]:
        """The addresses of an attendee list field."""
        elem = self.fields.get(name)
        if elem is None:
            return []
        return [e.text or "" for e in elem.iter(f"{T}EmailAddress")]

    def notified(self, mode: str | None) -> list[str]:
        """The attendees a meeting sending mode reaches."""
        if mode not in _SENDING_MODES:
            return []
        return sorted({*self.attendees("RequiredAttendees"), *self.attendees("OptionalAttendees")})

    def to_json(self) -> dict[str, Any]:
        """The item as the control API shows it."""

        def tz(name: str) -> str | None:
            elem = self.fields.get(name)
            return None if elem is None else elem.get("Id")

        extended = {}
        for prop in self.extended.values():
            uri = prop.find(f"{T}ExtendedFieldURI")
            name = "" if uri is None else uri.get("PropertyName") or uri.get("PropertyId") or uri.get("PropertyTag")
            extended[name or ""] = prop.findtext(f"{T}Value")
        return {
            "id": self.id,
            "change_key": self.change_key,
            "mailbox": self.mailbox,
            "subject": self.text("Subject"),
            "body": self.text("Body"),
            "location": self.text("Location"),
            "start": self.text("Start"),
            "end": self.text("End"),
            "start_time_zone": tz("StartTimeZone"),
            "end_time_zone": tz("EndTimeZone"),
            "is_all_day": self.text("IsAllDayEvent") in ("1", "true"),
            "required_attendees": self.attendees("RequiredAttendees"),
            "optional_attendees": self.attendees("OptionalAttendees"),
            "uid": self.text("UID"),
            "extended_properties": extended,
        }


@dataclass(frozen=True)
class Tombstone:
    """What the change log keeps of a deleted item: its ids, when it was made and when it went."""

    id: str
    change_key: str
    created_seq: int
    seq: int


@dataclass(frozen=True)
class Changes:
    """A mailbox's items changed after a sequence number (the latest state of each) and the deletions since."""

    items: list[Item]
    deleted: list[Tombstone]
    seq: int  # the mailbox's sequence now: a sync state built on it sees everything up to here


def check_times(fields: Mapping[str, ET.Element]) -> None:
    """Refuse an End before the Start, as Exchange does."""
    start, end = fields.get("Start"), fields.get("End")
    if start is None or end is None:
        return
    try:
        ordered = parse_time(start.text or "") <= parse_time(end.text or "")
    except ValueError:
        raise EwsError("ErrorSchemaValidation", "Start or End is not a valid xs:dateTime.") from None
    if not ordered:
        raise EwsError("ErrorCalendarEndDateIsEarlierThanStartDate", "The end date occurs before the start date.")


def encode_state(fields: Mapping[str, Any]) -> str:
    """An opaque sync state or delta token (ours: base64 of JSON; the same fields give the same text)."""
    return base64.urlsafe_b64encode(json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()).decode()


def decode_state(text: str) -> dict[str, Any] | None:
    """The fields of a state :func:`encode_state` made, or None when it is not one."""
    try:
        fields = json.loads(base64.urlsafe_b64decode(text.encode()))
    except (binascii.Error, ValueError, UnicodeDecodeError):
        return None
    return fields if isinstance(fields, dict) else None


def is_item_id(item_id: str) -> bool:
    """Whether an ItemId is one this emulator could have issued."""
    try:
        return base64.urlsafe_b64decode(item_id.encode()).startswith(_ITEM_ID_PREFIX)
    except (binascii.Error, ValueError):
        return False


class MailboxStore:
    """Every mailbox's items in creation order, indexed by extended property value; shares the app's lock.

    The index only narrows lookups (FindItem by our sync-key property would otherwise scan every item of a
    mailbox, and throughput fell with each round of a benchmark): callers still test each candidate, so what
    a lookup returns is what a scan would. It is kept current by :meth:`add`, :meth:`changed` (every change
    to a stored item, which Exchange marks with a new ChangeKey) and :meth:`remove`. Graph's create looks its
    ``transactionId`` up in a second index (set at creation, never changed, dropped with the item).
    """

    def __init__(self, lock: threading.RLock) -> None:
        self.lock = lock
        self.reset()

    def reset(self) -> None:
        """Forget every item and restart the ChangeKey counter."""
        with self.lock:
            self._items: dict[str, Item] = {}
            self._mailboxes: dict[str, dict[str, Item]] = {}
            self._by_property: dict[tuple[str, str, str | None], dict[str, Item]] = {}
            self._indexed: dict[str, list[tuple[str, str, str | None]]] = {}
            self._created: dict[str, int] = {}  # item id -> creation number, for creation order
            self._by_transaction: dict[tuple[str, str], Item] = {}
            self._changes = 0
            self.generation = uuid.uuid4().hex[:12]  # sync states of an earlier store (or before expire()) are void
            self.tombstone_limit = DEFAULT_TOMBSTONE_LIMIT
            self._seq: dict[str, int] = {}
            self._floor: dict[str, int] = {}  # sync states older than this sequence missed a forgotten tombstone
            self._tombstones: dict[str, dict[str, Tombstone]] = {}

    def _next_change_key(self) -> str:
        with self.lock:
            self._changes += 1
            return base64.b64encode(f"CK{self._changes:08d}".encode()).decode()

    def new_item(self, mailbox: str) -> Item:
        """An item with a fresh ItemId and ChangeKey, not stored yet."""
        item_id = base64.urlsafe_b64encode(_ITEM_ID_PREFIX + uuid.uuid4().bytes).decode()
        return Item(item_id, mailbox, self._next_change_key())

    def add(self, item: Item) -> None:
        """Store a new item."""
        with self.lock:
            self._items[item.id] = item
            item.created_seq = item.changed_seq = self._bump(item.mailbox)
            self._created[item.id] = len(self._created)
            self._mailboxes.setdefault(item.mailbox, {})[item.id] = item
            self._index(item)
            if item.transaction_id is not None:
                self._by_transaction.setdefault((item.mailbox, item.transaction_id), item)

    def changed(self, item: Item) -> None:
        """A stored item's fields or properties changed: a new ChangeKey, and the index follows."""
        with self.lock:
            item.change_key = self._next_change_key()
            item.changed_seq = self._bump(item.mailbox)
            self._unindex(item.id)
            self._index(item)

    def _bump(self, mailbox: str) -> int:
        self._seq[mailbox] = self._seq.get(mailbox, 0) + 1
        return self._seq[mailbox]

    def _bury(self, item: Item) -> None:
        graves = self._tombstones.setdefault(item.mailbox, {})
        graves[item.id] = Tombstone(item.id, item.change_key, item.created_seq, self._bump(item.mailbox))
        while len(graves) > self.tombstone_limit:  # the oldest is forgotten: older sync states are now void
            oldest = next(iter(graves))
            self._floor[item.mailbox] = max(self._floor.get(item.mailbox, 0), graves.pop(oldest).seq)

    def sequence(self, mailbox: str) -> int:
        """The mailbox's change sequence now (0 before its first change)."""
        with self.lock:
            return self._seq.get(mailbox, 0)

    def valid_since(self, mailbox: str, seq: int) -> bool:
        """Whether a sync state at ``seq`` can still be answered (no tombstone it needs was forgotten)."""
        with self.lock:
            return self._floor.get(mailbox, 0) <= seq <= self._seq.get(mailbox, 0)

    def changes_since(self, mailbox: str, seq: int) -> Changes:
        """Every item created or changed after ``seq`` and every deletion after it, each ordered by sequence."""
        with self.lock:
            items = sorted((i for i in self._mailboxes.get(mailbox, {}).values() if i.changed_seq > seq),
                           key=lambda i: i.changed_seq)  # fmt: skip
            deleted = [t for t in self._tombstones.get(mailbox, {}).values() if t.seq > seq]
            return Changes(items, deleted, self._seq.get(mailbox, 0))

    def expire_sync_states(self) -> None:
        """Every sync state and delta token issued so far becomes invalid (the server lost its sync data)."""
        with self.lock:
            self.generation = uuid.uuid4().hex[:12]
            self._tombstones.clear()
            self._floor = dict(self._seq)

    def get(self, item_id: str) -> Item | None:
        """The item with this id, if any."""
        with self.lock:
            return self._items.get(item_id)

    def remove(self, item_id: str) -> None:
        """Delete an item."""
        with self.lock:
            item = self._items.pop(item_id)
            del self._mailboxes[item.mailbox][item_id]
            self._unindex(item_id)
            made = (item.mailbox, item.transaction_id or "")
            if self._by_transaction.get(made) is item:
                del self._by_transaction[made]
            self._bury(item)

    def in_mailbox(self, mailbox: str) -> list[Item]:
        """The items of one mailbox."""
        with self.lock:
            return list(self._mailboxes.get(mailbox, {}).values())

    def with_transaction(self, mailbox: str, transaction: str) -> Item | None:
        """The mailbox's item a Graph create with this ``transactionId`` made, if it is still there."""
        with self.lock:
            return self._by_transaction.get((mailbox, transaction))

    def with_property(self, mailbox: str, key: str, value: str | None) -> list[Item]:
        """The items of a mailbox that may carry property ``key`` = ``value`` (a superset), in creation order."""
        with self.lock:
            found = self._by_property.get((mailbox, key, value), {})
            return sorted(found.values(), key=lambda item: self._created[item.id])

    def _index(self, item: Item) -> None:
        keys = [(item.mailbox, key, prop.findtext(f"{T}Value")) for key, prop in item.extended.items()]
        for entry in keys:
            self._by_property.setdefault(entry, {})[item.id] = item
        self._indexed[item.id] = keys

    def _unindex(self, item_id: str) -> None:
        for entry in self._indexed.pop(item_id, []):
            holders = self._by_property[entry]
            del holders[item_id]
            if not holders:
                del self._by_property[entry]

    def to_json(self, mailbox: str | None = None) -> list[dict[str, Any]]:
        """Stored items as JSON objects, optionally for one mailbox."""
        with self.lock:
            return [i.to_json() for i in self._items.values() if mailbox is None or i.mailbox == mailbox.lower()]

    def edit(self, item: Item, changes: Mapping[str, Any]) -> None:
        """A user edits the subject, location, body or times (xs:dateTime) in Outlook: the ChangeKey changes.

        An End before the Start raises :class:`EwsError` (``ErrorCalendarEndDateIsEarlierThanStartDate``), as
        Outlook refuses it, and the item is left as it was.
        """
        with self.lock:
            fields = dict(item.fields)
            for name, tag in _EDITABLE:
                if name in changes:
                    elem = ET.Element(f"{T}{tag}")
                    elem.text = str(changes[name])
                    fields[tag] = elem
            check_times(fields)
            item.fields = fields
            self.changed(item)

"""EWS ``SyncFolderItems`` on the calendar folder, over the mailbox store's change log.

Exchange behaviour kept (documented, SyncFolderItems operation and its elements): without ``SyncState`` the
first call returns every item of the folder as ``Create``; with one, the changes since as ``Create`` (made
since), ``Update`` (changed since) and ``Delete`` (an ``ItemId`` only); at most ``MaxChangesReturned`` changes
(1 to 512, else a schema-validation fault) per call, ``IncludesLastItemInRange`` false while more remain, a new
``SyncState`` in every answer; an invalid state answers ``ErrorInvalidSyncStateData`` in the documented error
shape (an empty ``SyncState`` and ``IncludesLastItemInRange``, which exchangelib reads before the code);
properties like ``Body`` cannot be returned ("use GetItem").

Inferred: an item changed several times since the state is reported once, in its latest state (Exchange
collapses changes the same way in practice); an item made and deleted since the state is not reported; an
expired state (older than a forgotten tombstone, or issued before ``expire_sync_states``) is refused like an
invalid one; asking for ``Body`` or ``Attachments`` answers ``ErrorInvalidPropertyRequest`` (what FindItem
answers; the documentation only says they cannot be returned); an unchanged folder answers the state it was
given (exchangelib stops when the state does not move); ``Ignore`` and ``SyncScope`` are accepted and ignored.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Callable

from calsync_emulators.ews.directory import Caller
from calsync_emulators.ews.mailbox import Item, MailboxStore, Tombstone, decode_state, encode_state
from calsync_emulators.ews.soap import EwsError, M, error, success
from calsync_emulators.ews.views import Shape, render, shape_of

MAX_CHANGES = 512
_NOT_IN_SYNC = ("Body", "Attachments")
_INVALID_STATE = "Synchronization state data is corrupt or otherwise invalid."

FolderOf = Callable[[ET.Element, Caller], tuple[str, str]]


class SyncFolderItems:
    """The operation handler: folder resolution and access checks come from the other operations."""

    def __init__(self, store: MailboxStore, folder_of: FolderOf) -> None:
        self._store = store
        self._folder_of = folder_of

    def __call__(self, operation: ET.Element, caller: Caller) -> list[str]:
        """One ResponseMessage: a page of changes and the next SyncState, or an error in the documented shape."""
        try:
            return [self._serve(operation, caller)]
        except EwsError as exc:
            if exc.fault:
                raise
            return [error("SyncFolderItems", exc.code, exc.message)]

    def _serve(self, operation: ET.Element, caller: Caller) -> str:
        folder = operation.find(f"{M}SyncFolderId")
        if folder is None or len(folder) == 0:
            raise EwsError("ErrorSchemaValidation", "SyncFolderId is required.", fault=True)
        try:
            limit = int(operation.findtext(f"{M}MaxChangesReturned") or "")
        except ValueError:
            limit = 0
        if not 1 <= limit <= MAX_CHANGES:
            raise EwsError("ErrorSchemaValidation", "MaxChangesReturned must be between 1 and 512.", fault=True)
        shape = shape_of(operation.find(f"{M}ItemShape"))
        if shape.everything or shape.names & set(_NOT_IN_SYNC):
            raise EwsError("ErrorInvalidPropertyRequest", "The property can't be used in SyncFolderItems requests.")
        mailbox, name = self._folder_of(folder[0], caller)
        with self._store.lock:
            since = self._since(mailbox, operation.findtext(f"{M}SyncState"))
            if since is None:
                caller.log["sync"] = "invalid"
                raise EwsError("ErrorInvalidSyncStateData", _INVALID_STATE)
            changes = self._store.changes_since(mailbox, since)
            entries: list[tuple[int, Item | Tombstone]] = [(i.changed_seq, i) for i in changes.items]
            entries += [(t.seq, t) for t in changes.deleted if t.created_seq <= since]
            entries = [] if name != "calendar" else sorted(entries, key=lambda e: e[0])
            page, more = entries[:limit], len(entries) > limit
            upto = page[-1][0] if more else changes.seq
            body = "".join(self._change(entry, since, shape) for _, entry in page)
            state = encode_state({"g": self._store.generation, "m": mailbox, "s": upto})
        caller.log.update(sync="full" if since == 0 else "incremental", changes=len(page))
        return success(
            "SyncFolderItems",
            f"<m:SyncState>{state}</m:SyncState>"
            f"<m:IncludesLastItemInRange>{'false' if more else 'true'}</m:IncludesLastItemInRange>"
            f"<m:Changes>{body}</m:Changes>",
        )

    def _since(self, mailbox: str, text: str | None) -> int | None:
        """The sequence a SyncState stands for (0 without one), None when it is not valid here and now."""
        if not text:
            return 0
        fields = decode_state(text.strip())
        if fields is None or fields.get("g") != self._store.generation or fields.get("m") != mailbox:
            return None
        seq = fields.get("s")
        return seq if isinstance(seq, int) and self._store.valid_since(mailbox, seq) else None

    @staticmethod
    def _change(entry: Item | Tombstone, since: int, shape: Shape) -> str:
        if isinstance(entry, Tombstone):
            return f'<t:Delete><t:ItemId Id="{entry.id}" ChangeKey="{entry.change_key}"/></t:Delete>'
        kind = "Create" if entry.created_seq > since else "Update"
        return f"<t:{kind}>{render(entry, shape)}</t:{kind}>"

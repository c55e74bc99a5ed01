"""The SOAP operations exchangelib sends for calendar sync: GetFolder, CreateItem, FindItem, GetItem,
UpdateItem, DeleteItem, SyncFolderItems (:mod:`.sync`) and ConvertId (only ever answered with an error: it is
sent when guessing versions).

Exchange behaviour kept (documented, and verified with exchangelib): one ResponseMessage per input in
request order, ``TotalItemsInView``/``IncludesLastItemInRange`` on FindItem, the same ItemId back from
UpdateItem, a stale ChangeKey refused with ``ErrorIrresolvableConflict``, DeleteItem ignoring the
ChangeKey. Our simplifications: a stale ChangeKey is never merged (even with ``AutoResolve``), only the
calendar folder holds items, meeting requests are recorded in the log instead of sent.
"""

from __future__ import annotations

import base64
import binascii
import copy
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable
from xml.sax.saxutils import escape

from calsync_emulators.ews.directory import Access, Caller
from calsync_emulators.ews.mailbox import Item, MailboxStore, check_times, is_item_id
from calsync_emulators.ews.soap import END_ITEMS, EwsError, M, S, T, error, local, prop_key, stored, success
from calsync_emulators.ews.sync import SyncFolderItems
from calsync_emulators.ews.views import matches, property_lookup, render, shape_of

Operation = Callable[[ET.Element, Caller], list[str]]
_CONTAINERS = {
    "CreateItem": f"{M}Items",
    "UpdateItem": f"{M}ItemChanges",
    "GetItem": f"{M}ItemIds",
    "DeleteItem": f"{M}ItemIds",
    "GetFolder": f"{M}FolderIds",
    "FindItem": f"{M}ParentFolderIds",
}
_CONFLICT = (
    "The send or update operation could not be performed because "
    "the change key passed in the request does not match the current change key for the item."
)


def _children(parent: ET.Element | None) -> list[ET.Element]:
    return [] if parent is None else list(parent)


def per_item(op: str, elems: Iterable[ET.Element], serve: Callable[[ET.Element], str]) -> list[str]:
    """One ResponseMessage per input: success, or that item's error (a SOAP fault error propagates)."""
    messages = []
    for elem in elems:
        try:
            messages.append(success(op, serve(elem)))
        except EwsError as exc:
            if exc.fault:
                raise
            messages.append(error(op, exc.code, exc.message))
    return messages


def item_count(op: str, body: bytes) -> int:
    """How many ResponseMessages a request expects (for fault rules answering every item with an error)."""
    try:
        operation = ET.fromstring(body).find(f"{S}Body/{M}{op}")
    except ET.ParseError:
        return 1
    if operation is None:
        return 1
    container = operation.find(_CONTAINERS[op]) if op in _CONTAINERS else None
    return max(1, len(container)) if container is not None else 1


def _folder_id(mailbox: str, name: str) -> str:
    return base64.urlsafe_b64encode(f"folder:{mailbox}:{name}".encode()).decode()


def _apply_update(update: ET.Element, fields: dict[str, ET.Element], extended: dict[str, ET.Element]) -> None:
    kind = local(update.tag)
    path = update[0] if len(update) else None
    if path is None:
        raise EwsError("ErrorSchemaValidation", f"{kind} without a property path.")
    if local(path.tag) == "ExtendedFieldURI":
        key = prop_key(path)
        if kind == "DeleteItemField":
            extended.pop(key, None)
            return
        prop = update.find(f"./{T}CalendarItem/{T}ExtendedProperty")
        if prop is None:
            raise EwsError("ErrorInvalidExtendedProperty", "The extended property value is missing.")
        extended[key] = copy.deepcopy(prop)
        return
    name = path.get("FieldURI", "").split(":", 1)[-1]
    if kind == "DeleteItemField":
        fields.pop(name, None)
        return
    value = update.find(f"./{T}CalendarItem/{T}{name}")
    if value is None:
        raise EwsError("ErrorSchemaValidation", f"{kind} for {name} carries no {name} element.")
    fields[name] = stored(value)


class Operations:
    """The operation handlers over the mailbox store, with access checked per folder and item."""

    def __init__(self, store: MailboxStore, access: Access) -> None:
        self._store = store
        self._access = access
        self.handlers: dict[str, Operation] = {
            "GetFolder": self._get_folder,
            "CreateItem": self._create_item,
            "FindItem": self._find_item,
            "GetItem": self._get_item,
            "UpdateItem": self._update_item,
            "DeleteItem": self._delete_item,
            "ConvertId": self._convert_id,
            "SyncFolderItems": SyncFolderItems(store, self._folder_of),
        }

    def _folder_of(self, elem: ET.Element, caller: Caller) -> tuple[str, str]:
        """(mailbox, distinguished name) of a DistinguishedFolderId or FolderId element."""
        if local(elem.tag) == "DistinguishedFolderId":
            mailbox = elem.findtext(f"{T}Mailbox/{T}EmailAddress") or caller.default_mailbox
            return self._access.authorize(caller, mailbox), elem.get("Id", "")
        try:
            kind, mailbox, name = base64.urlsafe_b64decode(elem.get("Id", "")).decode().split(":", 2)
        except (binascii.Error, UnicodeDecodeError, ValueError):
            raise EwsError("ErrorInvalidIdMalformed", "Id is malformed.") from None
        if kind != "folder":
            raise EwsError("ErrorFolderNotFound", "The specified folder could not be found in the store.")
        return self._access.authorize(caller, mailbox), name

    def _lookup(self, item_id: str, caller: Caller) -> Item:
        if not is_item_id(item_id):
            raise EwsError("ErrorInvalidIdMalformed", "Id is malformed.")
        item = self._store.get(item_id)
        if item is None:
            raise EwsError("ErrorItemNotFound", "The specified object was not found in the store.")
        self._access.authorize(caller, item.mailbox)
        return item

    def _get_folder(self, operation: ET.Element, caller: Caller) -> list[str]:
        def serve(elem: ET.Element) -> str:
            mailbox, name = self._folder_of(elem, caller)
            count = len(self._store.in_mailbox(mailbox))
            tag, folder_class, display = (
                ("CalendarFolder", "IPF.Appointment", "Calendar") if name == "calendar" else ("Folder", None, name)
            )
            klass = f"<t:FolderClass>{folder_class}</t:FolderClass>" if folder_class else ""
            return (
                f'<m:Folders><t:{tag}><t:FolderId Id="{_folder_id(mailbox, name)}" ChangeKey="AQAAAA=="/>'
                f'<t:ParentFolderId Id="{_folder_id(mailbox, "root")}" ChangeKey="AQAAAA=="/>{klass}'
                f"<t:DisplayName>{escape(display)}</t:DisplayName><t:TotalCount>{count if tag != 'Folder' else 0}"
                f"</t:TotalCount><t:ChildFolderCount>0</t:ChildFolderCount><t:UnreadCount>0</t:UnreadCount>"
                f"</t:{tag}></m:Folders>"
            )

        return per_item("GetFolder", _children(operation.find(f"{M}FolderIds")), serve)

    def _create_item(self, operation: ET.Element, caller: Caller) -> list[str]:
        mode = operation.get("SendMeetingInvitations")
        caller.log["send_meeting_invitations"] = mode
        target = operation.find(f"{M}SavedItemFolderId")
        folder = None if target is None or len(target) == 0 else target[0]
        notified: set[str] = set()

        def serve(elem: ET.Element) -> str:
            if folder is None:
                mailbox, name = self._access.authorize(caller, caller.default_mailbox), "calendar"
            else:
                mailbox, name = self._folder_of(folder, caller)
            if local(elem.tag) != "CalendarItem" or name != "calendar":
                raise EwsError("ErrorInvalidOperation", "The emulator stores calendar items in the calendar only.")
            item = self._store.new_item(mailbox)
            for child in elem:
                if local(child.tag) == "ExtendedProperty":
                    uri = child.find(f"{T}ExtendedFieldURI")
                    if uri is None:
                        raise EwsError("ErrorSchemaValidation", "ExtendedProperty without ExtendedFieldURI.")
                    item.extended[prop_key(uri)] = copy.deepcopy(child)
                else:
                    item.fields[local(child.tag)] = stored(child)
            check_times(item.fields)
            self._store.add(item)
            notified.update(item.notified(mode))
            return f'<m:Items><t:CalendarItem><t:ItemId Id="{item.id}" ChangeKey="{item.change_key}"/>{END_ITEMS}'

        messages = per_item("CreateItem", _children(operation.find(f"{M}Items")), serve)
        caller.log["notified"] = sorted(notified)
        return messages

    def _find_item(self, operation: ET.Element, caller: Caller) -> list[str]:
        shape = shape_of(operation.find(f"{M}ItemShape"))
        restriction = operation.find(f"{M}Restriction")
        view = operation.find(f"{M}IndexedPageItemView")
        offset = int(view.get("Offset", "0")) if view is not None else 0
        limit = int(view.get("MaxEntriesReturned", "1000")) if view is not None else 1000

        def serve(elem: ET.Element) -> str:
            mailbox, name = self._folder_of(elem, caller)
            if name != "calendar":
                items = []
            elif restriction is not None and len(restriction):
                lookup = property_lookup(restriction[0])
                candidates = (
                    self._store.in_mailbox(mailbox) if lookup is None else self._store.with_property(mailbox, *lookup)
                )
                items = [i for i in candidates if matches(i, restriction[0])]
            else:
                items = self._store.in_mailbox(mailbox)
            page = items[offset : offset + limit]
            last = "true" if offset + len(page) >= len(items) else "false"
            return (
                f'<m:RootFolder IndexedPagingOffset="{offset + len(page)}" TotalItemsInView="{len(items)}" '
                f'IncludesLastItemInRange="{last}"><t:Items>'
                + "".join(render(i, shape) for i in page)
                + "</t:Items></m:RootFolder>"
            )

        return per_item("FindItem", _children(operation.find(f"{M}ParentFolderIds")), serve)

    def _get_item(self, operation: ET.Element, caller: Caller) -> list[str]:
        shape = shape_of(operation.find(f"{M}ItemShape"))

        def serve(elem: ET.Element) -> str:
            return f"<m:Items>{render(self._lookup(elem.get('Id', ''), caller), shape)}</m:Items>"

        return per_item("GetItem", _children(operation.find(f"{M}ItemIds")), serve)

    def _update_item(self, operation: ET.Element, caller: Caller) -> list[str]:
        mode = operation.get("SendMeetingInvitationsOrCancellations")
        resolution = operation.get("ConflictResolution", "AutoResolve")
        caller.log.update(send_meeting_invitations_or_cancellations=mode, conflict_resolution=resolution)
        notified: set[str] = set()

        def serve(change: ET.Element) -> str:
            item_id = change.find(f"{T}ItemId")
            if item_id is None:
                raise EwsError("ErrorSchemaValidation", "ItemChange without ItemId.")
            with self._store.lock:
                item = self._lookup(item_id.get("Id", ""), caller)
                change_key = item_id.get("ChangeKey")
                if change_key is None and resolution != "AlwaysOverwrite":
                    raise EwsError(
                        "ErrorChangeKeyRequiredForWriteOperations", "A ChangeKey is required for this update."
                    )
                if change_key is not None and change_key != item.change_key and resolution != "AlwaysOverwrite":
                    raise EwsError("ErrorIrresolvableConflict", _CONFLICT)
                fields, extended = dict(item.fields), dict(item.extended)
                for update in change.findall(f"{T}Updates/*"):
                    _apply_update(update, fields, extended)
                check_times(fields)
                item.fields, item.extended = fields, extended
                self._store.changed(item)
                notified.update(item.notified(mode))
                return (
                    f'<m:Items><t:CalendarItem><t:ItemId Id="{item.id}" ChangeKey="{item.change_key}"/>{END_ITEMS}'
                    "<m:ConflictResults><t:Count>0</t:Count></m:ConflictResults>"
                )

        messages = per_item("UpdateItem", _children(operation.find(f"{M}ItemChanges")), serve)
        caller.log["notified"] = sorted(notified)
        return messages

    def _delete_item(self, operation: ET.Element, caller: Caller) -> list[str]:
        mode = operation.get("SendMeetingCancellations")
        caller.log["send_meeting_cancellations"] = mode
        notified: set[str] = set()

        def serve(elem: ET.Element) -> str:
            with self._store.lock:
                item = self._lookup(elem.get("Id", ""), caller)
                self._store.remove(item.id)
            notified.update(item.notified(mode))
            return ""

        messages = per_item("DeleteItem", _children(operation.find(f"{M}ItemIds")), serve)
        caller.log["notified"] = sorted(notified)
        return messages

    def _convert_id(self, operation: ET.Element, caller: Caller) -> list[str]:
        def serve(elem: ET.Element) -> str:
            raise EwsError("ErrorInvalidIdMalformed", "Id is malformed.")

        return per_item("ConvertId", _children(operation.find(f"{M}SourceIds")), serve)

"""The EWS emulator's own control routes under ``/_emulator/``: items, directory, tokens, barriers, sync states."""

from __future__ import annotations

from urllib.parse import unquote

from pydantic import ValidationError

from calsync_emulators.ews.barriers import Barriers
from calsync_emulators.ews.directory import Access, Directory
from calsync_emulators.ews.mailbox import MailboxStore
from calsync_emulators.ews.soap import EwsError
from calsync_emulators.server import Request, Response


class ControlRoutes:
    """Serves the routes of the package docstring over the app's store, access rules and barriers."""

    def __init__(self, store: MailboxStore, access: Access, barriers: Barriers) -> None:
        self._store = store
        self._access = access
        self._barriers = barriers

    def serve(self, request: Request) -> Response | None:
        """Answer a control route; None when it is not one of ours."""
        parts = request.raw_path.split("/")[2:]
        route = (request.method, parts[0] if parts else "")
        if route[1] == "items":
            return self._items(request, parts[1:])
        if route == ("GET", "directory"):
            return Response.json(200, self._access.directory.model_dump())
        if route == ("PUT", "directory"):
            try:
                directory = Directory.model_validate(request.json() or {})
            except (ValidationError, ValueError) as exc:
                return Response.json(400, {"error": str(exc)})
            self._access.replace_directory(directory)
            return Response.json(200, directory.model_dump())
        if route == ("POST", "tokens") and parts[1:] == ["revoke"]:
            return Response.json(200, {"revoked": self._access.revoke_tokens()})
        if route == ("POST", "barriers"):
            return self._add_barrier(request)
        if route == ("POST", "sync-states") and parts[1:] == ["expire"]:
            self._store.expire_sync_states()
            return Response.json(200, {"expired": True})
        if route == ("PUT", "sync-states"):
            return self._sync_config(request)
        return None

    def _sync_config(self, request: Request) -> Response:
        spec = request.json() or {}
        try:
            limit = int(spec["tombstone_limit"])
        except (KeyError, TypeError, ValueError):
            return Response.json(400, {"error": "need tombstone_limit"})
        if limit < 0:
            return Response.json(400, {"error": "tombstone_limit must not be negative"})
        with self._store.lock:
            self._store.tombstone_limit = limit
        return Response.json(200, {"tombstone_limit": limit})

    def _add_barrier(self, request: Request) -> Response:
        spec = request.json() or {}
        try:
            parties, timeout_ms = int(spec["parties"]), int(spec.get("timeout_ms", 10000))
            operation = spec["operation"]
        except (KeyError, TypeError, ValueError):
            return Response.json(400, {"error": "need operation, parties and optionally timeout_ms"})
        if parties < 1:
            return Response.json(400, {"error": "parties must be at least 1"})
        self._barriers.add(operation, parties, timeout_ms)
        return Response.json(201, {"operation": operation, "parties": parties, "timeout_ms": timeout_ms})

    def _items(self, request: Request, rest: list[str]) -> Response | None:
        if not rest:
            if request.method != "GET":
                return None
            mailbox = request.query.get("mailbox", [None])[0]
            return Response.json(200, self._store.to_json(mailbox))
        item_id = unquote(rest[0])
        with self._store.lock:
            item = self._store.get(item_id)
            if item is None:
                return Response.json(404, {"error": f"no item {item_id}"})
            if request.method == "GET":
                return Response.json(200, item.to_json())
            if request.method == "DELETE":
                self._store.remove(item_id)
                return Response.json(200, {"deleted": item_id})
            if request.method == "PATCH":
                try:
                    self._store.edit(item, request.json() or {})
                except EwsError as exc:
                    return Response.json(400, {"error": f"{exc.code}: {exc.message}"})
                return Response.json(200, item.to_json())
        return None

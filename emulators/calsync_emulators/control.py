"""The one client of the emulators' control API (``/_emulator/...``), for tests and the demo.

Standard library only (urllib), and never through ``HTTP(S)_PROXY``: the emulators run on localhost.
A non-2xx answer raises :class:`urllib.error.HTTPError`.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlencode

from calsync_emulators.ews.directory import Directory
from calsync_emulators.graph.convert import store_id
from calsync_emulators.server import CONTROL_PREFIX


class EmulatorControl:
    """The control routes every emulator shares: reset, the request log and fault rules."""

    def __init__(self, base_url: str, timeout: float = 30) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def control(self, method: str, route: str, payload: Any = None) -> Any:
        """Call any control route and return its JSON answer."""
        data = None if payload is None else json.dumps(payload).encode()
        request = urllib.request.Request(
            f"{self.base_url}{CONTROL_PREFIX}{route}",
            data=data,
            method=method,
            headers={"Content-Type": "application/json"},
        )
        with self._opener.open(request, timeout=self.timeout) as answer:
            return json.loads(answer.read() or b"null")

    def reset(self) -> None:
        """Forget all state, fault rules and the request log."""
        self.control("POST", "reset")

    def requests(self, operation: str | None = None) -> list[dict[str, Any]]:
        """The request log, optionally only the entries of one ``operation`` (EWS: a SOAP operation or ``token``)."""
        log: list[dict[str, Any]] = self.control("GET", "requests")
        return [r for r in log if operation is None or r.get("operation") == operation]

    def request_count(self) -> dict[str, int]:
        """Requests logged since the reset (``total``) and those not answered 2xx (``failed``), log limit aside."""
        counts: dict[str, int] = self.control("GET", "requests/count")
        return counts

    def wait_for_requests(self, operation: str, count: int, timeout: float = 10) -> list[dict[str, Any]]:
        """Block until the log holds ``count`` entries for ``operation`` (e.g. a delayed request that finished)."""
        deadline = time.monotonic() + timeout
        while len(found := self.requests(operation)) < count:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(found)} of {count} {operation} requests logged after {timeout} s")
            time.sleep(0.01)
        return found

    def highest_concurrency(self) -> dict[str, int]:
        """The most requests ever in flight at once per key (a calendar, a mailbox) since the last reset."""
        return dict(self.control("GET", "concurrency")["highest"])

    def add_fault(self, **rule: Any) -> dict[str, Any]:
        """Install a fault rule (the emulator's :class:`~calsync_emulators.faults.FaultRule` subclass)."""
        answer: dict[str, Any] = self.control("POST", "faults", rule)
        return answer

    def faults(self) -> list[dict[str, Any]]:
        """The fault rules still active, with what is left of their ``times``."""
        rules: list[dict[str, Any]] = self.control("GET", "faults")
        return rules

    def clear_faults(self) -> None:
        """Remove every fault rule."""
        self.control("DELETE", "faults")


class GoogleControl(EmulatorControl):
    """The Google Calendar emulator: its endpoints for the client, and its own control routes."""

    @property
    def api_endpoint(self) -> str:
        """What ``CALSYNC_GOOGLE_API_ENDPOINT`` must be."""
        return f"{self.base_url}/calendar/v3/"

    @property
    def token_uri(self) -> str:
        """The OAuth token endpoint, for the ``token_uri`` of credentials."""
        return f"{self.base_url}/token"

    def user_credentials(self, refresh_token: str, client_id: str, client_secret: str) -> dict[str, str]:
        """Google's ``authorized_user`` JSON with the emulator as token endpoint."""
        return {
            "type": "authorized_user",
            "client_id": client_id,
            "client_secret": client_secret,
            "refresh_token": refresh_token,
            "token_uri": self.token_uri,
        }

    def edit_event(self, calendar_id: str, event_id: str, **changes: Any) -> dict[str, Any]:
        """Change an event as its owner would in Calendar's UI (merged like a PATCH; new etag); returns it."""
        path = f"calendars/{quote(calendar_id, safe='')}/events/{quote(event_id, safe='')}"
        event: dict[str, Any] = self.control("PATCH", path, changes)
        return event

    def delete_event(self, calendar_id: str, event_id: str) -> None:
        """Delete an event as its owner would in Calendar's UI (it becomes a cancelled tombstone)."""
        self.control("DELETE", f"calendars/{quote(calendar_id, safe='')}/events/{quote(event_id, safe='')}")


class EwsControl(EmulatorControl):
    """The EWS emulator: its endpoint for the client, and its own control routes."""

    @property
    def server_url(self) -> str:
        """The EWS endpoint, for an Exchange account's ``server_url`` option."""
        return f"{self.base_url}/EWS/Exchange.asmx"

    def items(self, mailbox: str | None = None) -> list[dict[str, Any]]:
        """Stored items, optionally of one mailbox."""
        query = "" if mailbox is None else "?" + urlencode({"mailbox": mailbox})
        items: list[dict[str, Any]] = self.control("GET", f"items{query}")
        return items

    def item(self, item_id: str) -> dict[str, Any]:
        """One stored item."""
        item: dict[str, Any] = self.control("GET", f"items/{quote(item_id, safe='')}")
        return item

    def edit_item(self, item_id: str, **changes: str) -> dict[str, Any]:
        """Edit an item as its owner would in Outlook (new ChangeKey)."""
        item: dict[str, Any] = self.control("PATCH", f"items/{quote(item_id, safe='')}", changes)
        return item

    def delete_item(self, item_id: str) -> None:
        """Delete an item as its owner would in Outlook."""
        self.control("DELETE", f"items/{quote(item_id, safe='')}")

    def expire_sync_states(self) -> None:
        """Every SyncState and Graph delta token issued so far is refused from now on."""
        self.control("POST", "sync-states/expire")

    def set_tombstone_limit(self, limit: int) -> None:
        """How many deletions per mailbox the change log remembers (older sync states are refused)."""
        self.control("PUT", "sync-states", {"tombstone_limit": limit})

    def set_directory(self, directory: Directory | Mapping[str, Any]) -> None:
        """Replace who may log in and which mailboxes exist."""
        payload = directory.model_dump() if isinstance(directory, Directory) else dict(directory)
        self.control("PUT", "directory", payload)

    def revoke_tokens(self) -> int:
        """Invalidate every issued bearer token; returns how many there were."""
        answer: dict[str, int] = self.control("POST", "tokens/revoke")
        return answer["revoked"]

    def add_barrier(self, operation: str, parties: int, timeout_ms: int = 10000) -> None:
        """Make the next ``parties`` requests for ``operation`` wait for each other."""
        self.control("POST", "barriers", {"operation": operation, "parties": parties, "timeout_ms": timeout_ms})


class GraphControl(EwsControl):
    """The Exchange server emulator (EWS + Graph + Entra): Graph's endpoints and the ``graph/`` control routes."""

    def __init__(self, base_url: str, timeout: float = 30) -> None:
        super().__init__(base_url.replace("https://", "http://", 1), timeout)

    @property
    def https_url(self) -> str:
        """The emulator over TLS (the same port)."""
        return self.base_url.replace("http://", "https://", 1)

    @property
    def api_endpoint(self) -> str:
        """What ``CALSYNC_GRAPH_API_ENDPOINT`` must be."""
        return f"{self.https_url}/v1.0/"

    def app_credentials(self, client_id: str = "calsync-client", secret: str = "client-secret",
                        tenant: str = "example-tenant") -> dict[str, str]:  # fmt: skip
        """App-only credentials JSON with the emulator as authority."""
        return {"type": "client_credentials", "tenant_id": tenant, "client_id": client_id,
                "client_secret": secret, "authority": self.https_url}  # fmt: skip

    def user_credentials(self, user: str, client_id: str = "calsync-client", secret: str | None = "client-secret",
                         tenant: str = "example-tenant") -> dict[str, str]:  # fmt: skip
        """Delegated credentials JSON holding a fresh refresh token of ``user``."""
        answer: dict[str, str] = self.control("POST", "graph/refresh-tokens", {"client_id": client_id, "user": user})
        credentials = {"type": "refresh_token", "tenant_id": tenant, "client_id": client_id,
                       "refresh_token": answer["refresh_token"], "authority": self.https_url}  # fmt: skip
        if secret is not None:
            credentials["client_secret"] = secret
        return credentials

    def items(self, mailbox: str | None = None) -> list[dict[str, Any]]:
        """Stored items with Graph ids (``id``) and EWS ItemIds (``ews_id``), optionally of one mailbox."""
        query = "" if mailbox is None else "?" + urlencode({"mailbox": mailbox})
        items: list[dict[str, Any]] = self.control("GET", f"graph/items{query}")
        return items

    def item(self, item_id: str) -> dict[str, Any]:
        """One stored item, by Graph id."""
        return {**super().item(store_id(item_id)), "id": item_id}

    def edit_item(self, item_id: str, **changes: str) -> dict[str, Any]:
        """Edit an item (by Graph id) as its owner would in Outlook (new changeKey and ``@odata.etag``)."""
        item: dict[str, Any] = self.control("PATCH", f"graph/items/{quote(item_id, safe='')}", changes)
        return item

    def delete_item(self, item_id: str) -> None:
        """Delete an item (by Graph id) as its owner would in Outlook."""
        self.control("DELETE", f"graph/items/{quote(item_id, safe='')}")

    def revoke_user(self, user: str, code: int = 50173) -> int:
        """Revoke the user's refresh tokens (AADSTS ``code``); returns how many families."""
        answer: dict[str, int] = self.control("POST", "graph/revoke", {"user": user, "code": code})
        return answer["revoked"]

    def expire_secret(self, client_id: str = "calsync-client") -> None:
        """The app's client secret expired (AADSTS7000222)."""
        self.control("POST", "graph/secrets/expire", {"client_id": client_id})

    def expire_tokens(self) -> int:
        """Every access token expires now."""
        answer: dict[str, int] = self.control("POST", "graph/tokens/expire")
        return answer["expired"]

    def set_policy(self, mailboxes: list[str] | None, client_id: str = "calsync-client") -> None:
        """Scope the app with an application access policy (None removes it)."""
        self.control("PUT", "graph/policy", {"client_id": client_id, "mailboxes": mailboxes})

    def configure(self, **config: float) -> dict[str, Any]:
        """Set ``token_lifetime``, ``latency_ms`` or ``mailbox_concurrency``."""
        answer: dict[str, Any] = self.control("POST", "graph/config", config)
        return answer

    def concurrency(self) -> dict[str, Any]:
        """``{"in_flight", "peak", "throttled", "limit"}`` per mailbox."""
        answer: dict[str, Any] = self.control("GET", "graph/concurrency")
        return answer

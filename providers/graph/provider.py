"""The Graph adapter: Exchange Online calendar events over Microsoft Graph v1.0, on httpx + msal.

Idempotency and repair rules (facts and sources: docs/notes/exchange.md, "Microsoft Graph"):

- Every event carries the shared MAPI marker (core/model/markers.py) holding ``target.sync_key``, the very
  property the EWS adapter writes, so items created over EWS are found (and adopted) over Graph.
- A create POSTs with a deterministic ``transactionId`` (seeded with the gone event's id when it re-creates an
  event deleted behind our back). After an ambiguous failure (timeout, dropped
  connection, 5xx) or ``ErrorDuplicateTransactionId`` (400; some fakes answer 409) it looks the key up by
  ``$filter`` on the marker and adopts what it finds; the marker, not the transactionId, is the truth.
- A stored ref that is not ours (an EWS ItemId + ChangeKey after ``accounts update --provider graph``) is
  resolved by the marker first, so the migrated event is adopted, never duplicated.
- An update PATCHes the full wanted state with ``If-Match`` of the last synced ``@odata.etag``; 412 →
  re-read (checking the marker) and re-apply under the new etag, a bounded number of times. 404 → resolve
  by marker, else recreate (local state is the source of truth).
- A delete of a missing event (404) is success.
- Every request holds one of the mailbox's concurrency slots (at most 4 per app and mailbox, shared by all
  workers through the injected limiter; none without one); a 401 drops the access token and retries once.
- No retries in the HTTP client; every failure goes through :data:`~.classification.CLASSIFICATION`.
- No cookies: neither Graph nor the token calls need them (the client's jar refuses every one, so none is sent).
- Every request is counted as it goes out (core/model/provider_io.py) by the client's ``request`` event hook,
  which httpx runs before handing a request to any transport (msal's token calls go through the same client).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import http.cookiejar
import logging
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote, urlsplit

import certifi
import httpx

from calsync.core.model.adapter_parts import ConcurrencyLimiter, CredentialWriter, DiscardCredentials
from calsync.core.model.calendar import Account, EventState, ExternalRef, ProviderName, SendUpdates, Target
from calsync.core.model.drift import ReadBack
from calsync.core.model.errors import CalsyncError, InvalidRequest, TemporaryError
from calsync.core.model.markers import GRAPH_SYNC_KEY_PROPERTY_ID
from calsync.core.model.provider_io import request_sent
from calsync.providers.accounts import AccountCache
from calsync.providers.graph import delta
from calsync.providers.graph.classification import GraphHttpError, classify
from calsync.providers.graph.credentials import GraphAccount, read_graph_account
from calsync.providers.graph.event_body import event_body, is_graph_ref, marker_of, ref_of
from calsync.providers.graph.tokens import TokenSource

logger = logging.getLogger(__name__)

T = TypeVar("T")
MAX_CONFLICTS = 3
DUPLICATE_TRANSACTION = "ErrorDuplicateTransactionId"
_PREFER = 'IdType="ImmutableId", outlook.timezone="UTC"'


def _odata_string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


@dataclass(frozen=True)
class _Session:
    """One account's view of the API for the duration of one provider call."""

    config: GraphAccount
    tokens: TokenSource
    slot: str
    user: str


class GraphProvider:
    """Pushes local event state into Exchange Online calendars over Graph; safe to share between worker threads."""

    name: ProviderName = "graph"

    def __init__(
        self,
        api_endpoint: str,
        *,
        timeout: float,
        pool_size: int,
        ca_file: Path | None = None,
        limiter: ConcurrencyLimiter | None = None,
        credentials: CredentialWriter | None = None,
    ) -> None:
        """``api_endpoint`` (Graph's, or an emulator's trusted through ``ca_file`` besides certifi's roots);
        ``timeout`` bounds each request; ``pool_size`` connections (one per worker thread); ``limiter``: the
        mailboxes' concurrency slots (None: none taken, for a one-off call); ``credentials``: where rotated refresh
        tokens are stored (default: nowhere)."""
        self._timeout, self._pool_size = timeout, pool_size
        self._trust = ssl.create_default_context(cafile=certifi.where())
        if ca_file is not None:
            self._trust.load_verify_locations(cafile=str(ca_file))
        self._base = api_endpoint.rstrip("/") + "/"
        endpoint = urlsplit(self._base)
        self._scope = f"{endpoint.scheme}://{endpoint.netloc}/.default"
        self._http, self._tokens = self._connect()
        self._limiter = limiter
        self._writer = credentials or DiscardCredentials()

    # --- Provider protocol -----------------------------------------------------------------------

    def upsert(self, account: Account, event: EventState, target: Target) -> ExternalRef:
        """Create (adopting a lost or EWS-made create) or update the target's event to show ``event``."""
        return self._run(account, "upsert", lambda s: self._upsert(s, event, target))

    def delete(self, account: Account, target: Target, *, send_updates: SendUpdates = "none") -> None:
        """Delete the target's event (found by its marker when no Graph id is known); already gone is fine."""
        # Graph always mails a cancellation when an organizer deletes a meeting with attendees.
        self._run(account, "delete", lambda s: self._delete(s, target))

    def read_back(self, account: Account, cursor: str | None) -> ReadBack:
        """The mailbox's marked events changed since ``cursor`` (all when None or refused): delta.py."""

        def read(s: _Session) -> ReadBack:
            send = functools.partial(self._send, s)
            return delta.Reader(send, self._base, s.user, s.config.calendar, dt.datetime.now(dt.UTC)).read_back(cursor)

        return self._run(account, "read_back", read)

    def fingerprint(self, account: Account, event: EventState) -> str:
        """The owned fields of what ``upsert`` writes for ``event``, as :meth:`read_back` reduces an event."""
        return delta.fingerprint(event)

    def verify(self, account: Account) -> None:
        """One token call to Entra with the account's login (``accounts add --verify``); a refusal is permanent."""
        self._run(account, "token", lambda s: s.tokens.access_token(self._writer))

    def close(self) -> None:
        """Close pooled connections (worker shutdown); a later call reconnects, with new token caches."""
        closing = self._http
        self._http, self._tokens = self._connect()
        closing.close()

    def _connect(self) -> tuple[httpx.Client, AccountCache[TokenSource]]:
        """One pooled client for API and token calls alike (proxies read once, here), and msal apps on it."""
        threads = self._pool_size
        client = httpx.Client(
            timeout=self._timeout,
            limits=httpx.Limits(max_connections=threads * 2, max_keepalive_connections=threads),
            verify=self._trust,
            cookies=http.cookiejar.CookieJar(http.cookiejar.DefaultCookiePolicy(allowed_domains=[])),  # refuses all
            event_hooks={"request": [lambda _: request_sent()]},
        )
        return client, AccountCache()

    # --- flows -----------------------------------------------------------------------------------

    def _upsert(self, s: _Session, event: EventState, target: Target) -> ExternalRef:
        if target.external_id is None:
            return self._create(s, event, target)
        wanted = event_body(event, target.sync_key, event.send_updates, create=False)
        if is_graph_ref(target.external_id, target.etag):
            try:
                return ref_of(self._patch(s, target.external_id, wanted, target.etag))
            except GraphHttpError as exc:
                if exc.status == 412:
                    return self._reapply(s, target.external_id, event, target)
                if exc.status != 404:
                    raise
                logger.info("Graph event %s is gone; resolving sync key %s", target.external_id, target.sync_key)
        found = self._lookup(s, target.sync_key)
        if found:
            logger.info("Adopting Graph event %s for sync key %s", found[0], target.sync_key)
            return self._reapply(s, found[0], event, target)
        return self._create(s, event, target, replacing=target.external_id)

    def _create(self, s: _Session, event: EventState, target: Target, replacing: str | None = None) -> ExternalRef:
        body = event_body(event, target.sync_key, event.send_updates, create=True, replacing=replacing)
        path = f"{s.user}/calendars/{quote(s.config.calendar, safe='')}/events" if s.config.calendar else (
            f"{s.user}/calendar/events")  # fmt: skip
        try:
            return ref_of(self._send(s, "POST", path, json=body).json())
        except GraphHttpError as exc:  # a replay Graph dropped, or a server error after the create was sent
            if exc.code != DUPLICATE_TRANSACTION and exc.status < 500:
                raise
            failure: BaseException = exc
        except (httpx.TimeoutException, httpx.TransportError) as exc:  # no answer: maybe applied
            failure = exc
        found = self._lookup(s, target.sync_key)
        if not found:
            raise failure
        logger.info("Adopting Graph event %s for sync key %s after %s", found[0], target.sync_key, failure)
        return self._reapply(s, found[0], event, target)

    def _reapply(self, s: _Session, event_id: str, event: EventState, target: Target) -> ExternalRef:
        """Re-read the event (is it ours?) and apply our state under its current etag until no one races us."""
        wanted = event_body(event, target.sync_key, event.send_updates, create=False)
        for _ in range(MAX_CONFLICTS):
            try:
                current = self._send(s, "GET", self._item(s, event_id), params={"$expand": delta.EXPAND}).json()
            except GraphHttpError as exc:
                if exc.status != 404:
                    raise
                logger.info("Graph event %s was deleted in Exchange; recreating it", event_id)
                return self._create(s, event, target, replacing=event_id)
            if marker_of(current) != target.sync_key:
                raise InvalidRequest(f"Graph event {event_id} exists but was not created by calsync for this target")
            try:
                return ref_of(self._patch(s, event_id, wanted, current.get("@odata.etag")))
            except GraphHttpError as exc:
                if exc.status != 412:
                    raise
        raise TemporaryError(f"Graph event {event_id} changed under us {MAX_CONFLICTS} times in a row")

    def _delete(self, s: _Session, target: Target) -> None:
        ids = [target.external_id] if is_graph_ref(target.external_id, target.etag) else []
        for event_id in ids or self._lookup(s, target.sync_key):
            try:
                self._send(s, "DELETE", self._item(s, event_id))
            except GraphHttpError as exc:
                if exc.status != 404:
                    raise
                logger.info("Graph event %s was already gone", event_id)

    def _lookup(self, s: _Session, sync_key: str) -> list[str]:
        """Ids of the mailbox's events carrying ``sync_key`` (the filter's value match is case-insensitive)."""
        where = (
            f"singleValueExtendedProperties/Any(ep: ep/id eq {_odata_string(GRAPH_SYNC_KEY_PROPERTY_ID)} "
            f"and ep/value eq {_odata_string(sync_key)})"
        )
        params = {"$filter": where, "$expand": delta.EXPAND, "$select": "id"}
        found = self._send(s, "GET", f"{s.user}/events", params=params).json().get("value") or []
        ids = [str(e["id"]) for e in found if marker_of(e) == sync_key]
        if len(ids) > 1:
            logger.warning("%d Graph events carry sync key %s; using the first", len(ids), sync_key)
        return ids

    def _patch(self, s: _Session, event_id: str, body: Mapping[str, Any], etag: str | None) -> Any:
        headers = {"If-Match": etag} if etag else {}
        return self._send(s, "PATCH", self._item(s, event_id), json=body, headers=headers).json()

    # --- plumbing --------------------------------------------------------------------------------

    @staticmethod
    def _item(s: _Session, event_id: str) -> str:
        return f"{s.user}/events/{quote(event_id, safe='')}"

    def _run(self, account: Account, operation: str, flow: Callable[[_Session], T]) -> T:
        config = read_graph_account(account)
        tokens: TokenSource | None = None
        try:
            tokens = self._tokens.get(
                account.id, config.fingerprint, lambda seen: TokenSource(account, config, self._scope, self._http, seen)
            )
            slot = f"graph:{config.login.client_id}:{account.address.lower()}"
            return flow(_Session(config, tokens, slot, f"users/{quote(account.address, safe='@')}"))
        except CalsyncError:
            raise
        except Exception as exc:
            live = tokens.secrets() if tokens is not None else ()
            raise classify(exc, operation, account.address, (*config.secrets, *live)) from exc

    def _send(
        self,
        s: _Session,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> httpx.Response:
        """One API call holding a mailbox slot; a 401 is retried once with a new token; non-2xx raise GraphHttpError."""
        for attempt in (1, 2):
            token = s.tokens.access_token(self._writer)
            sent = {"Authorization": f"Bearer {token}", "Prefer": _PREFER, **(headers or {})}
            with self._limiter.slot(s.slot) if self._limiter else contextlib.nullcontext():
                response = self._http.request(method, self._base + path, json=json, params=params, headers=sent)
            if response.status_code == 401 and attempt == 1:
                logger.info("Graph %s %s: access token rejected, refreshing once", method, path)
                s.tokens.invalidate()
                continue
            if response.is_success:
                return response
            raise GraphHttpError.of(response)
        raise AssertionError("unreachable")

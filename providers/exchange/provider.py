"""The Exchange adapter: calendar items over EWS with exchangelib, safe to run twice for the same change.

Idempotency and repair rules:

- Every item carries the extended property ``CalsyncSyncKey`` = ``target.sync_key``. A create first looks
  the key up and adopts a match (applying the latest state to it), so a create whose response was lost
  never yields a second item. The adapter declares ``needs_create_marker``: the worker commits
  ``target.create_attempted`` before each create, so a target that says no create was ever sent (its first
  create) skips the lookup: one request instead of two (docs/notes/exchange.md, "Create lookups").
- An update sends ``target.etag`` as the ChangeKey. On a conflict (stale ChangeKey) or an unknown or
  malformed ItemId it re-resolves the item by sync key and re-applies the latest local state once.
  If no item carries the key, the item was deleted in Exchange behind our back and is **recreated**:
  local state is the source of truth, only a delete job removes an event for good.
- A delete of an item that is already gone succeeds; without ``target.external_id`` (or with a
  malformed one) it deletes every item carrying the sync key.
- EWS has no unique constraint: two workers creating the same key at the same moment could both miss
  the lookup. The pipeline's per-target lock is what rules that out.
- A bearer token rejected with 401 is retried once (exchangelib fetches a new token); a Basic/NTLM
  401 never is: repeating a wrong password can lock the account out. Both end as ``AuthRevoked``.

Mailboxes: one exchangelib Account with its calendar folder per calsync account, connected once, and again
when the account's options or credentials change. exchangelib runs with ``FailFast`` (the queue owns retries:
``FaultTolerance`` would sleep in the worker thread and share its back-off across every mailbox on a connection
pool), ``Version(EXCHANGE_2016)`` (the API of 2016, 2019, SE and Online) and the configured ``auth_type``, so no
probing requests are sent; the pool holds one connection per worker thread and requests time out after the
provider timeout.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from exchangelib import UTC, CalendarItem, Configuration, FailFast, Version
from exchangelib import Account as EwsAccount
from exchangelib.errors import (
    ErrorChangeKeyRequiredForWriteOperations,
    ErrorInvalidChangeKey,
    ErrorInvalidIdMalformed,
    ErrorIrresolvableConflict,
    ErrorItemNotFound,
    ErrorStaleObject,
    EWSError,
    UnauthorizedError,
)
from exchangelib.folders import Calendar, Root
from exchangelib.protocol import BaseProtocol
from exchangelib.version import EXCHANGE_2016

from calsync.core.model.calendar import Account, EventState, ExternalRef, ProviderName, SendUpdates, Target
from calsync.core.model.drift import ReadBack
from calsync.core.model.errors import AuthRevoked, CalsyncError, ConfigurationError
from calsync.core.model.provider_io import request_sent
from calsync.providers.accounts import AccountCache
from calsync.providers.exchange import sync_items
from calsync.providers.exchange.account_config import AccountConfig, read_account_config
from calsync.providers.exchange.classification import classify
from calsync.providers.exchange.items import SEND_MODES, UPDATE_FIELDS, item_fields
from calsync.providers.exchange.transport import CountingAdapter

logger = logging.getLogger(__name__)

T = TypeVar("T")

_STALE_REFERENCE = (
    ErrorItemNotFound,
    ErrorInvalidIdMalformed,
    ErrorIrresolvableConflict,
    ErrorInvalidChangeKey,
    ErrorStaleObject,
    ErrorChangeKeyRequiredForWriteOperations,
)


@dataclass(frozen=True)
class ConnectedMailbox:
    """An exchangelib Account with its resolved calendar folder."""

    account: Any
    calendar: Any


def connect(account: Account, config: AccountConfig, *, max_connections: int, timeout: float) -> ConnectedMailbox:
    """The account's mailbox and calendar folder, on a protocol pinned to our pool size, timeout and FailFast."""
    BaseProtocol.HTTP_ADAPTER_CLS = CountingAdapter  # every session exchangelib opens from now on counts its requests
    ews_config = Configuration(
        service_endpoint=config.options.server_url,
        credentials=config.credentials(),
        auth_type=config.auth_type,
        version=Version(build=EXCHANGE_2016),
        retry_policy=FailFast(),
        max_connections=max_connections,
    )
    if config.options.autodiscover:
        request_sent()  # autodiscover asks DNS before its first (counted) HTTP request
    ews = EwsAccount(
        account.address,
        config=ews_config,
        autodiscover=config.options.autodiscover,
        access_type=config.access_type,
        default_timezone=UTC,
    )
    # Protocols are cached process-wide per (endpoint, credentials) and the first Configuration's pool size
    # and retry policy win, so pin them on the protocol itself (docs/notes/exchange.md, "Protocol cache").
    protocol = ews.protocol
    protocol.max_connections = max_connections
    protocol.TIMEOUT = timeout
    if not isinstance(protocol.retry_policy, FailFast):
        protocol.config.retry_policy = FailFast()
    # Not Account.calendar: its cached_property lock is one per process, so first use would serialize
    # every mailbox's GetFolder calls behind each other (docs/notes/exchange.md, "Folder lookup").
    calendar = Root.get_distinguished(account=ews).get_default_folder(Calendar)
    return ConnectedMailbox(ews, calendar)


class ExchangeProvider:
    """Pushes local events into Exchange calendars over EWS; one instance serves every worker thread."""

    name: ProviderName = "exchange"
    needs_create_marker = True  # EWS cannot deduplicate a create: the worker records each attempt first

    def __init__(self, *, timeout: float, pool_size: int) -> None:
        """``timeout`` bounds each request; ``pool_size`` connections per mailbox's pool (one per worker thread)."""
        self._timeout = timeout
        self._max_connections = pool_size
        self._mailboxes: AccountCache[ConnectedMailbox] = AccountCache()

    def upsert(self, account: Account, event: EventState, target: Target) -> ExternalRef:
        """Create (adopting an item a lost response already created) or update the target's item."""
        fields = item_fields(event)
        mode = SEND_MODES[event.send_updates]
        if target.external_id is None:
            return self._run(account, "create", lambda mbx: self._create(mbx, fields, target, mode))
        return self._run(account, "update", lambda mbx: self._update(mbx, fields, target, mode))

    def delete(self, account: Account, target: Target, *, send_updates: SendUpdates = "none") -> None:
        """Delete the target's item; an item already gone counts as deleted."""
        mode = SEND_MODES[send_updates]
        self._run(account, "delete", lambda mbx: self._delete(mbx, target, mode))

    def read_back(self, account: Account, cursor: str | None) -> ReadBack:
        """The calendar's marked items changed since ``cursor`` (a SyncState; all when None or refused).

        SyncFolderItems, then GetItem for the marked changes (sync_items.py).
        """
        return self._run(account, "read_back", lambda m: sync_items.read_back(m.account, m.calendar, cursor))

    def fingerprint(self, account: Account, event: EventState) -> str:
        """The owned fields of what ``upsert`` writes for ``event``, as :meth:`read_back` reduces an item."""
        return sync_items.fingerprint(event)

    def verify(self, account: Account) -> None:
        """Connect the mailbox: one GetFolder of its calendar (after the token call for OAuth; ``--verify``)."""
        self._run(account, "verify", lambda mbx: None)

    def close(self) -> None:
        """Release pooled connections on worker shutdown (exchangelib keeps them open per credential)."""
        for mailbox in self._mailboxes.drain():
            mailbox.account.protocol.close()

    # --- plumbing -------------------------------------------------------------------------------

    def _run(self, account: Account, operation: str, action: Callable[[ConnectedMailbox], T]) -> T:
        """``action`` on the account's mailbox (its options and credentials validated first), its failure classified."""
        config = read_account_config(account)
        try:
            try:
                return action(self._mailbox(account, config))
            except UnauthorizedError:
                if not config.oauth:
                    raise
                # The 401 retired the session and cleared the token, so the next session fetches a fresh one
                # (docs/notes/exchange.md, "OAuth2 tokens").
                logger.info("Exchange %s for %s: bearer token rejected, retrying once", operation, account.address)
                return action(self._mailbox(account, config))
        except CalsyncError:
            raise
        except Exception as exc:
            error = classify(exc, operation, account.address, config.secrets)
            # Reconnect next time after bad credentials or configuration, and after any OAuth failure outside EWS:
            # a token fetch failing while exchangelib replaces a retired session leaks a pool slot for good.
            if isinstance(error, AuthRevoked | ConfigurationError) or (config.oauth and not isinstance(exc, EWSError)):
                self._mailboxes.evict(account.id)
            raise error from exc

    def _mailbox(self, account: Account, config: AccountConfig) -> ConnectedMailbox:
        return self._mailboxes.get(
            account.id,
            config.fingerprint,
            lambda _: connect(account, config, max_connections=self._max_connections, timeout=self._timeout),
        )

    @staticmethod
    def _find(mbx: ConnectedMailbox, sync_key: str) -> list[Any]:
        found = list(mbx.calendar.filter(calsync_sync_key=sync_key).only("id", "changekey"))
        # exchangelib yields some item-level errors (ErrorItemNotFound, ...) as values instead of raising them.
        for problem in (f for f in found if isinstance(f, Exception)):
            raise problem
        if len(found) > 1:
            logger.warning("%d Exchange items carry sync key %s; using the first", len(found), sync_key)
        return found

    @staticmethod
    def _save(mbx: ConnectedMailbox, fields: Mapping[str, Any], mode: str, **identity: Any) -> ExternalRef:
        """Create an item (``identity``: its ``calsync_sync_key``) or write every field :func:`item_fields` sets on
        an existing one (``identity``: its ``id`` and ``changekey``)."""
        item = CalendarItem(account=mbx.account, folder=mbx.calendar, **identity, **fields)
        item.save(update_fields=list(UPDATE_FIELDS) if item.id else None, send_meeting_invitations=mode)
        return ExternalRef(item.id, item.changekey)

    def _create(self, mbx: ConnectedMailbox, fields: Mapping[str, Any], target: Target, mode: str) -> ExternalRef:
        sync_key = target.sync_key
        existing = self._find(mbx, sync_key) if target.create_attempted else []  # none sent: nothing to find
        if existing:
            logger.info(
                "Adopting Exchange item %s for sync key %s (a previous create succeeded)", existing[0].id, sync_key
            )
            return self._save(mbx, fields, mode, id=existing[0].id, changekey=existing[0].changekey)
        return self._save(mbx, fields, mode, calsync_sync_key=sync_key)

    def _update(self, mbx: ConnectedMailbox, fields: Mapping[str, Any], target: Target, mode: str) -> ExternalRef:
        if target.external_id is not None and target.etag is not None:
            try:
                return self._save(mbx, fields, mode, id=target.external_id, changekey=target.etag)
            except _STALE_REFERENCE as exc:
                logger.info("Exchange item %s: %s, re-resolving by sync key", target.external_id, type(exc).__name__)
        current = self._find(mbx, target.sync_key)
        if not current:
            logger.info("Exchange item for sync key %s was deleted in Exchange; recreating it", target.sync_key)
            return self._save(mbx, fields, mode, calsync_sync_key=target.sync_key)
        return self._save(mbx, fields, mode, id=current[0].id, changekey=current[0].changekey)

    def _delete(self, mbx: ConnectedMailbox, target: Target, mode: str) -> None:
        if target.external_id is not None:
            try:
                self._remove(mbx, target.external_id, mode)
                return
            except ErrorInvalidIdMalformed:
                logger.info("Stored Exchange id %s is malformed, deleting by sync key", target.external_id)
        for item in self._find(mbx, target.sync_key):
            self._remove(mbx, item.id, mode)

    @staticmethod
    def _remove(mbx: ConnectedMailbox, item_id: str, mode: str) -> None:
        try:
            CalendarItem(account=mbx.account, folder=mbx.calendar, id=item_id).delete(send_meeting_cancellations=mode)
        except ErrorItemNotFound:
            logger.info("Exchange item %s was already gone", item_id)

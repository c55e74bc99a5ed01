"""Exchange adapter: calendar items over EWS with exchangelib, safe to run twice for the same change.

Deployments served
------------------
Exchange Server on-premises (2016, 2019 and Subscription Edition, which keep EWS) and Exchange Online
tenants that still allow EWS. Microsoft begins disabling EWS in Exchange Online on 1 Oct 2026; tenants
that allow-list the app (``EWSEnabled=True`` + ``EWSAllowedAppIDs``) keep it until the permanent
shutdown on 1 Apr 2027. A blocked mailbox answers HTTP 403 (→ :class:`~core.model.errors.Forbidden`). A
Microsoft Graph adapter for Exchange Online is planned separately.

Account configuration
---------------------
``account.address`` is the mailbox. ``account.options`` (not secret)::

    {"server_url": "https://mail.example.com/EWS/Exchange.asmx",  # required unless autodiscover
     "auth_type": "basic" | "ntlm" | "oauth2",                      # required: no auth probing
     "access_type": "delegate" | "impersonation",                   # default: impersonation for
                                                                    #   oauth2, else delegate
     "autodiscover": false}                                         # true: look the endpoint up
                                                                    #   (exchangelib's own probes:
                                                                    #   serialized per process, 10 s
                                                                    #   each; prefer server_url)

``account.credentials`` (secret), for basic/ntlm ``{"username", "password"}`` (``DOMAIN\\user`` or
a UPN), for oauth2 (client-credentials grant, scope ``https://outlook.office365.com/.default``)
``{"client_id", "client_secret", "tenant_id", "token_url"?}`` where ``token_url`` defaults to
Azure AD's ``https://login.microsoftonline.com/{tenant_id}/oauth2/v2.0/token``. Unknown keys, missing
values or a wrong type raise :class:`~core.model.errors.ConfigurationError` naming the key, never a value.

How it talks to Exchange
------------------------
exchangelib with ``FailFast`` (the queue owns retries: ``FaultTolerance`` would sleep in the worker
thread and share its back-off across every mailbox on a connection pool), ``Version(EXCHANGE_2016)``
(the API of 2016, 2019, SE and Online) and the configured ``auth_type``, so no probing requests are
sent; ``max_connections`` = ``CALSYNC_WORKER_THREADS`` and the request timeout =
``CALSYNC_PROVIDER_TIMEOUT``. One exchangelib ``Account`` (with its calendar folder) is cached per
calsync account and rebuilt when its options or credentials change. Queries use ``.only()``.

Idempotency and repair rules
----------------------------
- Every item carries the extended property ``CalsyncSyncKey`` (private property set
  :data:`SYNC_KEY_PROPERTY_SET`, String) = ``target.sync_key``. A create first looks the key up and
  adopts a match (applying the latest state to it), so a create whose response was lost never
  yields a second item.
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

Invitations: ``send_updates`` maps through :data:`SEND_MODES`. ``external_only`` has no EWS
equivalent (EWS cannot tell external attendees apart), so it sends to everyone, and everyone learns
of the change rather than external guests missing it. Only values valid for CreateItem, UpdateItem and
DeleteItem alike are used (exchangelib accepts different sets for each).

Times (as :mod:`core.model.change` defines them): a timed event takes date-times, a naive one being wall
time in ``event.time_zone`` (an IANA name) and an aware one an instant shown in that zone. All-day
events run from midnight of ``start`` to midnight of ``end`` in that zone, ``end`` exclusive (as
iCalendar and Google); ``end == start`` is read as one day.

Errors: :data:`CLASSIFICATION` is the one table from exchangelib/EWS failures to :mod:`core.model.errors`.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar
from urllib.parse import urlsplit

from exchangelib import (
    BASIC,
    NTLM,
    OAUTH2,
    UTC,
    Attendee,
    Body,
    CalendarItem,
    Configuration,
    Credentials,
    EWSDateTime,
    EWSTimeZone,
    ExtendedProperty,
    FailFast,
    Mailbox,
    OAuth2Credentials,
    Version,
)
from exchangelib import Account as EwsAccount
from exchangelib.errors import (
    ErrorChangeKeyRequiredForWriteOperations,
    ErrorInvalidChangeKey,
    ErrorInvalidIdMalformed,
    ErrorIrresolvableConflict,
    ErrorItemNotFound,
    ErrorStaleObject,
    EWSError,
    MalformedResponseError,
    TransportError,
    UnauthorizedError,
    UnknownTimeZone,
)
from exchangelib.folders import Calendar, Root
from exchangelib.items import SEND_TO_ALL_AND_SAVE_COPY, SEND_TO_NONE
from exchangelib.version import EXCHANGE_2016
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator, model_validator

from calsync.core.model.calendar import Account, EventState, ExternalRef, ProviderName, SendUpdates, Target
from calsync.core.model.errors import (
    AuthRevoked,
    CalsyncError,
    ConfigurationError,
    EntityNotFound,
    Forbidden,
    InvalidRequest,
    ProviderTimeout,
    ProviderUnavailable,
    RateLimited,
    TemporaryError,
)

if TYPE_CHECKING:
    from calsync.core.config.settings import Settings

logger = logging.getLogger(__name__)

T = TypeVar("T")

SYNC_KEY_PROPERTY_SET = "dc272488-8779-40b1-ac57-3b20cbf587cf"
SYNC_KEY_PROPERTY_NAME = "CalsyncSyncKey"

SEND_MODES: Mapping[SendUpdates, str] = {
    "all": SEND_TO_ALL_AND_SAVE_COPY,
    "external_only": SEND_TO_ALL_AND_SAVE_COPY,
    "none": SEND_TO_NONE,
}

_UPDATE_FIELDS = ("subject", "body", "location", "start", "end", "is_all_day", "required_attendees")
_AUTH_TYPES = {"basic": BASIC, "ntlm": NTLM, "oauth2": OAUTH2}
_STALE_REFERENCE = (
    ErrorItemNotFound,
    ErrorInvalidIdMalformed,
    ErrorIrresolvableConflict,
    ErrorInvalidChangeKey,
    ErrorStaleObject,
    ErrorChangeKeyRequiredForWriteOperations,
)


class _SyncKey(ExtendedProperty):  # type: ignore[misc]
    """Our (tenant, event, account) key on the item: a private named property, also visible to Graph later."""

    property_set_id = SYNC_KEY_PROPERTY_SET
    property_name = SYNC_KEY_PROPERTY_NAME
    property_type = "String"


CalendarItem.register("calsync_sync_key", _SyncKey)


class _TokenEndpointCredentials(OAuth2Credentials):  # type: ignore[misc]
    """Client credentials whose token endpoint is configurable (exchangelib hard-codes Azure AD's)."""

    def __init__(self, *, token_url: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._token_url = token_url

    @property
    def token_url(self) -> str:
        """Where the client-credentials grant is posted."""
        return self._token_url


# --- error classification ------------------------------------------------------------------------


@dataclass(frozen=True)
class Classification:
    """One row: an exchangelib/EWS error name, ``HTTP nnn`` or ``Prefix*``, and what it means for the job."""

    match: str
    error: type[CalsyncError]
    meaning: str

    def matches(self, name: str) -> bool:
        """Exact name, or prefix when the pattern ends with ``*``."""
        if self.match.endswith("*"):
            return name.startswith(self.match[:-1])
        return name == self.match


# Names are tried most specific first (see _error_names): a status parsed from MalformedResponseError,
# the original class of an "Reraised from X(...)" wrapper, the class itself, then its ancestors. Every
# EWS error subclasses TransportError, so no row may name TransportError; unmatched errors are retried.
CLASSIFICATION: tuple[Classification, ...] = (
    # Throttling: the server tells us when to come back (ErrorServerBusy carries BackOffMilliseconds).
    Classification("ErrorServerBusy", RateLimited, "server busy (EWS throttling)"),
    Classification("ErrorTooManyObjectsOpened", RateLimited, "too many objects opened (throttling)"),
    Classification("ErrorExceededConnectionCount", RateLimited, "too many concurrent connections"),
    Classification("HTTP 429", RateLimited, "too many requests (HTTP 429)"),
    # Our own deadline.
    Classification("ReadTimeout", ProviderTimeout, "no answer within PROVIDER_TIMEOUT"),
    # Infrastructure hiccups, failovers, mailbox moves. Network failures arrive as ErrorTimeoutExpired.
    Classification("ErrorTimeoutExpired", ProviderUnavailable, "connection failed or timed out"),
    Classification("ConnectionError", ProviderUnavailable, "connection refused or reset"),
    Classification("ErrorInternalServerTransientError", ProviderUnavailable, "transient server error"),
    Classification("ErrorInternalServerError", ProviderUnavailable, "internal server error"),
    Classification("ErrorMailboxStoreUnavailable", ProviderUnavailable, "mailbox store unavailable"),
    Classification("ErrorConnectionFailed", ProviderUnavailable, "server-side connection failed"),
    Classification("ErrorConnectionFailedTransientError", ProviderUnavailable, "server-side connection failed"),
    Classification("ErrorMailboxMoveInProgress", ProviderUnavailable, "mailbox move in progress"),
    Classification("ErrorADUnavailable", ProviderUnavailable, "directory unavailable"),
    Classification("HTTP 500", ProviderUnavailable, "server error (HTTP 500)"),
    Classification("HTTP 502", ProviderUnavailable, "bad gateway (HTTP 502)"),
    Classification("HTTP 504", ProviderUnavailable, "gateway timeout (HTTP 504)"),
    Classification("OAuth2Error", ProviderUnavailable, "token endpoint failed"),
    # Someone kept editing the item while we re-resolved and re-applied once.
    Classification("ErrorIrresolvableConflict", TemporaryError, "change key conflict persisted"),
    Classification("ErrorInvalidChangeKey", TemporaryError, "change key conflict persisted"),
    Classification("ErrorStaleObject", TemporaryError, "change key conflict persisted"),
    # Credentials: never retried, repeating a wrong password can lock the account out.
    Classification("UnauthorizedError", AuthRevoked, "credentials rejected"),
    Classification("InvalidClientError", AuthRevoked, "client id or secret rejected by the token endpoint"),
    Classification("UnauthorizedClientError", AuthRevoked, "application not authorized by the token endpoint"),
    Classification("InvalidGrantError", AuthRevoked, "grant rejected by the token endpoint"),
    # Permissions and policy.
    Classification("ErrorAccessDenied", Forbidden, "access denied"),
    Classification("ErrorImpersonateUserDenied", Forbidden, "impersonation not granted to this login"),
    Classification("ErrorImpersonationFailed", Forbidden, "impersonation failed"),
    Classification("HTTP 403", Forbidden, "EWS blocked for this mailbox or tenant (HTTP 403)"),
    Classification("ErrorQuotaExceeded", Forbidden, "mailbox quota exceeded"),
    # Things that do not exist.
    Classification("ErrorNonExistentMailbox", EntityNotFound, "mailbox does not exist"),
    Classification("ErrorFolderNotFound", EntityNotFound, "calendar folder not found"),
    Classification("ErrorItemNotFound", EntityNotFound, "item not found"),
    # Configuration.
    Classification("HTTP 404", ConfigurationError, "no EWS endpoint at server_url (HTTP 404)"),
    Classification("RedirectError", ConfigurationError, "server_url redirects; configure the final URL"),
    Classification("SSLError", ConfigurationError, "TLS handshake with server_url failed"),
    Classification("InsecureTransportError", ConfigurationError, "OAuth2 needs https for server_url and token_url"),
    Classification("InvalidScopeError", ConfigurationError, "token endpoint rejected the EWS scope"),
    Classification(
        "ErrorInvalidExchangeImpersonationHeaderData", ConfigurationError, "app-only tokens need impersonation"
    ),
    Classification(
        "ErrorInvalidSchemaVersionForMailboxVersion", ConfigurationError, "server does not speak the 2016 API"
    ),
    # The request itself is wrong.
    Classification("ErrorCalendar*", InvalidRequest, "calendar validation failed"),
    Classification("ErrorSchemaValidation", InvalidRequest, "request failed schema validation"),
    Classification("ErrorInvalidExtendedProperty*", InvalidRequest, "extended property rejected"),
    Classification("ErrorInvalidPropertyRequest", InvalidRequest, "property rejected"),
    Classification("ErrorInvalidIdMalformed", InvalidRequest, "malformed item id"),
)

_HTTP_STATUS = re.compile(r"Code: (\d{3})")
_RERAISED = re.compile(r"^Reraised from (\w+)\(")
_RETRY_AFTER = re.compile(r"'retry-after': '(\d+(?:\.\d+)?)'", re.IGNORECASE)
_DETAIL_LIMIT = 240


def _error_names(exc: BaseException) -> list[str]:
    names = []
    text = str(exc)
    if isinstance(exc, MalformedResponseError) and (status := _HTTP_STATUS.search(text)):
        names.append(f"HTTP {status.group(1)}")
    if reraised := _RERAISED.match(text):
        names.append(reraised.group(1))
    names.append(type(exc).__name__)
    # exchangelib turns TLS failures into a bare TransportError raised while handling the SSLError.
    if type(exc) is TransportError and exc.__context__ is not None:
        names.append(type(exc.__context__).__name__)
    names += [k.__name__ for k in type(exc).__mro__[1:] if k not in (BaseException, Exception, object)]
    return names


def _scrub(text: str, secrets: Iterable[str]) -> str:
    for secret in secrets:
        if len(secret) >= 4:
            text = text.replace(secret, "***")
    return text


def classify_error(exc: BaseException, *, operation: str, mailbox: str, secrets: Iterable[str] = ()) -> CalsyncError:
    """Turn an exchangelib/EWS/OAuth failure into the calsync error the retry policy acts on."""
    names = _error_names(exc)
    found = next(((name, row) for name in names for row in CLASSIFICATION if row.matches(name)), None)
    detail = " ".join(_scrub(str(exc), secrets).split())[:_DETAIL_LIMIT]
    if found is None:
        return TemporaryError(f"Exchange {operation} for {mailbox}: unclassified {type(exc).__name__}: {detail}")
    name, row = found
    message = f"Exchange {operation} for {mailbox}: {row.meaning} [{name}]: {detail}"
    if row.error is RateLimited:
        return RateLimited(message, retry_after=_retry_after(exc))
    return row.error(message)


def _retry_after(exc: BaseException) -> float | None:
    back_off = getattr(exc, "back_off", None)  # ErrorServerBusy: BackOffMilliseconds, in seconds
    if back_off:
        return float(back_off)
    header = _RETRY_AFTER.search(str(exc))  # a 429 only shows its Retry-After inside the message
    return float(header.group(1)) if header else None


# --- account configuration -----------------------------------------------------------------------


def _http_url(value: str | None) -> str | None:
    if value is not None:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError("must be an http(s) URL such as https://mail.example.com/EWS/Exchange.asmx")
    return value


class _Options(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    server_url: str | None = None
    auth_type: Literal["basic", "ntlm", "oauth2"]
    access_type: Literal["delegate", "impersonation"] | None = None
    autodiscover: bool = False

    _url = field_validator("server_url")(_http_url)

    @model_validator(mode="after")
    def _endpoint_known(self) -> _Options:
        if not self.server_url and not self.autodiscover:
            raise ValueError("server_url is required unless autodiscover is true")
        return self


class _PasswordLogin(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    username: str = Field(min_length=1)
    password: SecretStr = Field(min_length=1)


class _ClientLogin(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    client_id: str = Field(min_length=1)
    client_secret: SecretStr = Field(min_length=1)
    tenant_id: str = Field(min_length=1)
    token_url: str | None = None

    _url = field_validator("token_url")(_http_url)


@dataclass(frozen=True)
class _AccountConfig:
    """An account's validated options and credentials, plus what identifies them without revealing them."""

    options: _Options
    login: _PasswordLogin | _ClientLogin
    fingerprint: str

    @property
    def oauth(self) -> bool:
        return isinstance(self.login, _ClientLogin)

    @property
    def access_type(self) -> str:
        # exchangelib's DELEGATE / IMPERSONATION constants are these very strings.
        return self.options.access_type or ("impersonation" if self.oauth else "delegate")

    @property
    def secrets(self) -> tuple[str, ...]:
        if isinstance(self.login, _ClientLogin):
            return (self.login.client_secret.get_secret_value(),)
        return (self.login.password.get_secret_value(),)

    def credentials(self) -> Any:
        """exchangelib credentials for this login."""
        login = self.login
        if isinstance(login, _PasswordLogin):
            return Credentials(login.username, login.password.get_secret_value())
        token_url = login.token_url or f"https://login.microsoftonline.com/{login.tenant_id}/oauth2/v2.0/token"
        return _TokenEndpointCredentials(
            client_id=login.client_id,
            client_secret=login.client_secret.get_secret_value(),
            tenant_id=login.tenant_id,
            token_url=token_url,
        )


def _invalid(account: Account, section: str, exc: ValidationError) -> ConfigurationError:
    # Built from locations and messages only: pydantic's own text would echo the (secret) input.
    problems = "; ".join(f"{'.'.join([section, *(str(p) for p in err['loc'])])}: {err['msg']}" for err in exc.errors())
    return ConfigurationError(f"Exchange account {account.id}: {problems}")


def _account_config(account: Account) -> _AccountConfig:
    if account.address.count("@") != 1:
        raise ConfigurationError(f"Exchange account {account.id}: address must be the mailbox's SMTP address")
    try:
        options = _Options.model_validate(dict(account.options))
    except ValidationError as exc:
        raise _invalid(account, "options", exc) from None
    model: type[_PasswordLogin | _ClientLogin] = _ClientLogin if options.auth_type == "oauth2" else _PasswordLogin
    try:
        login = model.model_validate(dict(account.credentials))
    except ValidationError as exc:
        raise _invalid(account, "credentials", exc) from None
    identity = {
        "address": account.address.lower(),
        "options": dict(account.options),
        "login": dict(account.credentials),
    }
    fingerprint = hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()
    return _AccountConfig(options, login, fingerprint)


# --- event mapping -------------------------------------------------------------------------------


def _time_zone(name: str) -> Any:
    try:
        return EWSTimeZone(name)
    except (UnknownTimeZone, ValueError) as exc:
        raise InvalidRequest(f"time zone {name!r} has no Exchange equivalent") from exc


def _instant(value: dt.datetime | dt.date, tz: Any) -> Any:
    if not isinstance(value, dt.datetime):
        raise InvalidRequest("a timed event needs datetimes for start and end, got a date")
    # Events read back from the store carry fixed UTC offsets (datetime.timezone), which exchangelib cannot
    # name ("UTC+01:00"): hand it the instant in UTC, then show it in the event's zone.
    aware = value.astimezone(dt.UTC) if value.tzinfo is not None else value.replace(tzinfo=tz)
    return EWSDateTime.from_datetime(aware).astimezone(tz)


def _midnight(value: dt.datetime | dt.date, tz: Any) -> Any:
    day = value.date() if isinstance(value, dt.datetime) else value
    return EWSDateTime(day.year, day.month, day.day, tzinfo=tz)


def _item_fields(event: EventState) -> dict[str, Any]:
    tz = _time_zone(event.time_zone)
    if event.all_day:
        start, end = _midnight(event.start, tz), _midnight(event.end, tz)
        if end < start:
            raise InvalidRequest(f"event {event.id} ends ({end.date()}) before it starts ({start.date()})")
        end = max(end, _midnight(start + dt.timedelta(days=1), tz))
    else:
        start, end = _instant(event.start, tz), _instant(event.end, tz)
        if end < start:
            raise InvalidRequest(f"event {event.id} ends ({end.isoformat()}) before it starts ({start.isoformat()})")
    attendees = [Attendee(mailbox=Mailbox(email_address=a), response_type="Unknown") for a in event.attendees]
    return {
        "subject": event.title,
        "body": Body(event.description) if event.description else None,
        "location": event.location or None,
        "start": start,
        "end": end,
        "is_all_day": event.all_day,
        "required_attendees": attendees or None,
    }


# --- the adapter ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Mailbox:
    """An exchangelib Account with its resolved calendar folder."""

    account: Any
    calendar: Any


class _Entry:
    def __init__(self, fingerprint: str) -> None:
        self.fingerprint = fingerprint
        self.lock = threading.Lock()
        self.mailbox: _Mailbox | None = None


class _MailboxCache:
    """Mailboxes by calsync account id; each is connected once, without blocking other accounts meanwhile."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[str, _Entry] = {}

    def get(self, key: str, fingerprint: str, connect: Callable[[], _Mailbox]) -> _Mailbox:
        """The cached mailbox, connecting it first when missing or when its configuration changed."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None or entry.fingerprint != fingerprint:
                entry = self._entries[key] = _Entry(fingerprint)
        with entry.lock:
            if entry.mailbox is None:
                entry.mailbox = connect()
            return entry.mailbox

    def evict(self, key: str) -> None:
        """Forget a mailbox so the next call connects afresh (after auth or configuration failures)."""
        with self._lock:
            self._entries.pop(key, None)

    def drain(self) -> list[_Mailbox]:
        """Forget every mailbox, returning the connected ones."""
        with self._lock:
            entries, self._entries = list(self._entries.values()), {}
        return [e.mailbox for e in entries if e.mailbox is not None]


class ExchangeProvider:
    """Pushes local events into Exchange calendars over EWS; one instance serves every worker thread."""

    name: ProviderName = "exchange"

    def __init__(self, settings: Settings) -> None:
        self._timeout = settings.provider_timeout
        self._max_connections = settings.worker_threads
        self._mailboxes = _MailboxCache()

    def upsert(self, account: Account, event: EventState, target: Target) -> ExternalRef:
        """Create (adopting an item a lost response already created) or update the target's item."""
        config = _account_config(account)
        fields = _item_fields(event)
        mode = SEND_MODES[event.send_updates]
        if target.external_id is None:
            return self._run(account, config, "create", lambda mbx: self._create(mbx, fields, target.sync_key, mode))
        return self._run(account, config, "update", lambda mbx: self._update(mbx, fields, target, mode))

    def delete(self, account: Account, target: Target, *, send_updates: SendUpdates = "none") -> None:
        """Delete the target's item; an item already gone counts as deleted."""
        config = _account_config(account)
        mode = SEND_MODES[send_updates]
        self._run(account, config, "delete", lambda mbx: self._delete(mbx, target, mode))

    def close(self) -> None:
        """Release pooled connections on worker shutdown (exchangelib keeps them open per credential)."""
        for mailbox in self._mailboxes.drain():
            mailbox.account.protocol.close()

    # --- plumbing -------------------------------------------------------------------------------

    def _run(self, account: Account, config: _AccountConfig, operation: str, action: Callable[[_Mailbox], T]) -> T:
        try:
            try:
                return action(self._mailbox(account, config))
            except UnauthorizedError:
                if not config.oauth:
                    raise
                # The 401 retired the session and cleared the token, so the next session fetches a fresh one
                # (shared/notes/exchange-ews-graph-facts.md §1.7).
                logger.info("Exchange %s for %s: bearer token rejected, retrying once", operation, account.address)
                return action(self._mailbox(account, config))
        except CalsyncError:
            raise
        except Exception as exc:
            error = classify_error(exc, operation=operation, mailbox=account.address, secrets=config.secrets)
            # Reconnect next time after bad credentials or configuration, and after any OAuth failure outside EWS:
            # a token fetch failing while exchangelib replaces a retired session leaks a pool slot for good.
            if isinstance(error, AuthRevoked | ConfigurationError) or (config.oauth and not isinstance(exc, EWSError)):
                self._mailboxes.evict(account.id)
            raise error from exc

    def _mailbox(self, account: Account, config: _AccountConfig) -> _Mailbox:
        return self._mailboxes.get(account.id, config.fingerprint, lambda: self._connect(account, config))

    def _connect(self, account: Account, config: _AccountConfig) -> _Mailbox:
        ews_config = Configuration(
            service_endpoint=config.options.server_url,
            credentials=config.credentials(),
            auth_type=_AUTH_TYPES[config.options.auth_type],
            version=Version(build=EXCHANGE_2016),
            retry_policy=FailFast(),
            max_connections=self._max_connections,
        )
        ews = EwsAccount(
            account.address,
            config=ews_config,
            autodiscover=config.options.autodiscover,
            access_type=config.access_type,
            default_timezone=UTC,
        )
        # Protocols are cached process-wide per (endpoint, credentials) and the first Configuration's pool size
        # and retry policy win, so pin them on the protocol itself (exchange-ews-graph-facts.md §4).
        protocol = ews.protocol
        protocol.max_connections = self._max_connections
        protocol.TIMEOUT = self._timeout
        if not isinstance(protocol.retry_policy, FailFast):
            protocol.config.retry_policy = FailFast()
        # Not Account.calendar: its cached_property lock is one per process, so first use would serialize
        # every mailbox's GetFolder calls behind each other (same notes, §4).
        calendar = Root.get_distinguished(account=ews).get_default_folder(Calendar)
        return _Mailbox(ews, calendar)

    @staticmethod
    def _find(mbx: _Mailbox, sync_key: str) -> list[Any]:
        found = list(mbx.calendar.filter(calsync_sync_key=sync_key).only("id", "changekey"))
        # exchangelib yields some item-level errors (ErrorItemNotFound, ...) as values instead of raising them.
        for problem in (f for f in found if isinstance(f, Exception)):
            raise problem
        if len(found) > 1:
            logger.warning("%d Exchange items carry sync key %s; using the first", len(found), sync_key)
        return found

    @staticmethod
    def _insert(mbx: _Mailbox, fields: Mapping[str, Any], sync_key: str, mode: str) -> ExternalRef:
        item = CalendarItem(account=mbx.account, folder=mbx.calendar, calsync_sync_key=sync_key, **fields)
        item.save(send_meeting_invitations=mode)
        return ExternalRef(item.id, item.changekey)

    @staticmethod
    def _save(mbx: _Mailbox, item_id: str, change_key: str, fields: Mapping[str, Any], mode: str) -> ExternalRef:
        item = CalendarItem(account=mbx.account, folder=mbx.calendar, id=item_id, changekey=change_key, **fields)
        item.save(update_fields=list(_UPDATE_FIELDS), send_meeting_invitations=mode)
        return ExternalRef(item.id, item.changekey)

    def _create(self, mbx: _Mailbox, fields: Mapping[str, Any], sync_key: str, mode: str) -> ExternalRef:
        existing = self._find(mbx, sync_key)
        if existing:
            logger.info(
                "Adopting Exchange item %s for sync key %s (a previous create succeeded)", existing[0].id, sync_key
            )
            return self._save(mbx, existing[0].id, existing[0].changekey, fields, mode)
        return self._insert(mbx, fields, sync_key, mode)

    def _update(self, mbx: _Mailbox, fields: Mapping[str, Any], target: Target, mode: str) -> ExternalRef:
        if target.external_id is not None and target.etag is not None:
            try:
                return self._save(mbx, target.external_id, target.etag, fields, mode)
            except _STALE_REFERENCE as exc:
                logger.info("Exchange item %s: %s, re-resolving by sync key", target.external_id, type(exc).__name__)
        current = self._find(mbx, target.sync_key)
        if not current:
            logger.info("Exchange item for sync key %s was deleted in Exchange; recreating it", target.sync_key)
            return self._insert(mbx, fields, target.sync_key, mode)
        return self._save(mbx, current[0].id, current[0].changekey, fields, mode)

    def _delete(self, mbx: _Mailbox, target: Target, mode: str) -> None:
        if target.external_id is not None:
            try:
                self._remove(mbx, target.external_id, mode)
                return
            except ErrorInvalidIdMalformed:
                logger.info("Stored Exchange id %s is malformed, deleting by sync key", target.external_id)
        for item in self._find(mbx, target.sync_key):
            self._remove(mbx, item.id, mode)

    @staticmethod
    def _remove(mbx: _Mailbox, item_id: str, mode: str) -> None:
        try:
            CalendarItem(account=mbx.account, folder=mbx.calendar, id=item_id).delete(send_meeting_cancellations=mode)
        except ErrorItemNotFound:
            logger.info("Exchange item %s was already gone", item_id)

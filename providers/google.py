"""Google Calendar adapter: makes a Calendar v3 calendar show an :class:`EventState`, on the real client library.

Facts cited as "notes §n" are in shared/notes/google-calendar-facts.md.

- One service object per process (static discovery, endpoint from ``CALSYNC_GOOGLE_API_ENDPOINT``), each
  call executed through an ``AuthorizedHttp`` over a per-thread ``httplib2.Http``: httplib2 is not thread-safe
  and a shared one hands threads each other's responses (notes §4.5). That ``Http`` carries
  ``CALSYNC_PROVIDER_TIMEOUT``, so it bounds API calls and token refreshes alike (notes §4.1).
- ``execute(num_retries=0)``: the queue owns retries; the client's own retry re-sends inserts and ignores
  Retry-After (notes §4.2).
- Creates are idempotent: the event id is derived from ``target.sync_key`` and our keys live in
  ``extendedProperties.private``; a 409 ``duplicate`` means an earlier attempt (or a cancelled event) holds
  the id, so we adopt it and bring it to the wanted state, which also restores a cancelled event (notes §2.3).
- Updates send the full wanted state with ``If-Match`` of the last synced etag; on 412 we re-read, re-apply
  our state on top of what is there (keeping fields we don't manage) and retry, a bounded number of times.
- ``EventState.status`` is written as Google's ``status``: ``cancelled`` hides the event as a delete does, and
  a later upsert with ``confirmed`` restores it.
- Deletes treat 404 and 410 as done (notes §2.2).
- Every failure goes through :data:`CLASSIFICATION`, the one table of what is temporary and what is not.

``account.credentials`` is Google's own JSON, as a mapping:

- ``authorized_user``: ``client_id``, ``client_secret``, ``refresh_token``, optional ``token_uri`` (honoured,
  although google-auth's ``from_authorized_user_info`` ignores it), optional cached ``token``/``expiry``;
  ``type`` may be absent (google-auth-oauthlib's ``to_json()`` omits it);
- ``service_account``: the key file (``client_email``, ``private_key``, ``token_uri``, ...).

``account.options`` (all optional):

- ``calendar_id``: the calendar to write into (default ``account.address``, i.e. the user's primary calendar);
- ``subject``: the user a service account impersonates through domain-wide delegation (default
  ``account.address``);
- ``delegate``: ``false`` makes a service account act as itself instead of impersonating (default ``true``).
"""

from __future__ import annotations

import base64
import collections
import datetime as dt
import email.utils
import fnmatch
import hashlib
import http.client
import json
import re
import threading
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

import google_auth_httplib2
import httplib2
from google.auth.credentials import Credentials
from google.auth.exceptions import GoogleAuthError, RefreshError, TransportError
from google.oauth2 import credentials as user_credentials
from google.oauth2 import service_account
from googleapiclient.discovery import build
from googleapiclient.errors import HttpError

from calsync.core.config.settings import Settings
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

SCOPES = ("https://www.googleapis.com/auth/calendar.events",)
SYNC_KEY_PROPERTY = "calsyncKey"
VERSION_PROPERTY = "calsyncVersion"
QUOTA_RETRY_AFTER = 3600.0
MAX_CONFLICTS = 3

_SEND_UPDATES: dict[SendUpdates, str] = {"all": "all", "external_only": "externalOnly", "none": "none"}
_MANAGED_FIELDS = ("summary", "description", "location", "start", "end", "attendees", "status")
_SERVER_FIELDS = frozenset(
    {"kind", "etag", "id", "htmlLink", "created", "updated", "creator", "organizer", "iCalUID", "sequence"}
)
_SECRET_FIELDS = ("refresh_token", "client_secret", "private_key", "private_key_id", "token")
_TOKEN_PATTERNS = re.compile(
    r"(?i:bearer\s+\S+)|ya29\.[\w.-]+|1//[\w.-]+|eyJ[\w-]+\.[\w-]+\.[\w-]*"
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----",
    re.DOTALL,
)
_CREDENTIAL_CACHE_SIZE = 1024
_MESSAGE_LIMIT = 300


def event_id_for(sync_key: str) -> str:
    """Same sync key, same event id: a retried create collides with its own earlier attempt instead of duplicating."""
    # Lower-case base32hex is exactly Google's id alphabet [a-v0-9] (notes §2.1); 52 characters.
    return base64.b32hexencode(hashlib.sha256(sync_key.encode()).digest()).decode().rstrip("=").lower()


# --- classification ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Failure:
    """What the classifier knows about one failed call, reduced to primitives (never the request or its headers)."""

    exc: BaseException
    status: int | None
    codes: frozenset[str]
    message: str
    retry_after: float | None


@dataclass(frozen=True)
class Row:
    """One line of :data:`CLASSIFICATION`: which failures it covers and the error they become."""

    name: str
    error: type[CalsyncError]
    kinds: tuple[type[BaseException], ...]
    statuses: Collection[int] | None = None
    codes: tuple[str, ...] = ()
    retry_after: float | None = None

    def matches(self, failure: Failure) -> bool:
        """True when the failure's type, HTTP status and any of its codes (glob patterns) fit this row."""
        if not isinstance(failure.exc, self.kinds):
            return False
        if self.statuses is not None and failure.status not in self.statuses:
            return False
        return not self.codes or any(fnmatch.fnmatchcase(c, p) for c in failure.codes for p in self.codes)


#: First matching row wins. ``codes`` are matched against Google's ``errors[].reason``, ``details[].reason``
#: and ``error.status`` of an API error, or the OAuth ``error`` of a token-endpoint refusal (notes §1.3, §5.4).
CLASSIFICATION: tuple[Row, ...] = (
    Row("429 too many requests", RateLimited, (HttpError,), {429}),
    Row(
        "403 rate limit",
        RateLimited,
        (HttpError,),
        {403},
        ("rateLimitExceeded", "userRateLimitExceeded", "RATE_LIMIT_EXCEEDED"),
    ),
    # Calendar usage limits can make a calendar read-only for hours (notes §6.1): don't hot-loop.
    Row(
        "403 calendar usage limits",
        RateLimited,
        (HttpError,),
        {403},
        ("quotaExceeded", "dailyLimitExceeded"),
        retry_after=QUOTA_RETRY_AFTER,
    ),
    Row(
        "403 permission denied",
        Forbidden,
        (HttpError,),
        {403},
        ("forbidden*", "insufficientPermissions", "accessNotConfigured", "notACalendarUser", "PERMISSION_DENIED"),
    ),
    # AuthorizedHttp already refreshed the token twice before letting a 401 through (notes §5.3).
    Row("401 after refresh", AuthRevoked, (HttpError,), {401}),
    Row("400 bad request", InvalidRequest, (HttpError,), {400}),
    Row("404/410 calendar or event gone", EntityNotFound, (HttpError,), {404, 410}),
    Row("5xx server error", ProviderUnavailable, (HttpError,), range(500, 600)),
    Row(
        "token grant refused",
        AuthRevoked,
        (RefreshError,),
        codes=("invalid_grant", "invalid_client", "unauthorized_client", "invalid_scope", "access_denied"),
    ),
    Row("token endpoint failure", ProviderUnavailable, (RefreshError, TransportError)),
    Row("timeout", ProviderTimeout, (TimeoutError,)),
    Row(
        "connection failure",
        ProviderUnavailable,
        (OSError, http.client.HTTPException, httplib2.HttpLib2Error),
    ),
    Row("anything else", ProviderUnavailable, (Exception,)),
)


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return max(0.0, (when - dt.datetime.now(dt.UTC)).total_seconds())


def describe(exc: BaseException) -> Failure:
    """Read status, reasons and message from the body ourselves: ``HttpError.reason`` is prose (notes §1.3)."""
    if isinstance(exc, HttpError):
        status = int(exc.resp.status)
        codes: set[str] = set()
        message = str(getattr(exc.resp, "reason", "") or "")
        try:
            error = json.loads(exc.content).get("error")
        except (ValueError, TypeError, AttributeError):
            error = None
        if isinstance(error, dict):
            items = [*(error.get("errors") or []), *(error.get("details") or [])]
            codes.update(str(item["reason"]) for item in items if isinstance(item, dict) and item.get("reason"))
            if error.get("status"):
                codes.add(str(error["status"]))
            message = str(error.get("message") or message)
        return Failure(exc, status, frozenset(codes), message, _retry_after(exc.resp.get("retry-after")))
    if isinstance(exc, RefreshError):
        payload = exc.args[1] if len(exc.args) > 1 and isinstance(exc.args[1], dict) else {}
        code = payload.get("error")
        text = str(exc.args[0]) if exc.args else ""
        return Failure(exc, None, frozenset({code} if isinstance(code, str) else ()), text, None)
    return Failure(exc, None, frozenset(), f"{type(exc).__name__}: {exc}", None)


def scrub(text: str, secrets: Collection[str] = ()) -> str:
    """Remove credentials from a message: the account's own secrets and anything shaped like a token or key."""
    for secret in sorted((s for s in secrets if len(s) >= 4), key=len, reverse=True):
        text = text.replace(secret, "***")
    return _TOKEN_PATTERNS.sub("***", text)


def classify(exc: BaseException, operation: str, secrets: Collection[str] = ()) -> CalsyncError:
    """Turn a library failure into the calsync error the pipeline retries or dead-letters, with a scrubbed message."""
    failure = describe(exc)
    row = next(row for row in CLASSIFICATION if row.matches(failure))
    status = f"HTTP {failure.status} " if failure.status is not None else ""
    codes = ",".join(sorted(failure.codes))
    detail = f"{status}{codes + ': ' if codes else ''}{failure.message}"
    message = scrub(f"Google {operation} failed ({row.name}): {detail}", secrets)
    if len(message) > _MESSAGE_LIMIT:
        message = message[: _MESSAGE_LIMIT - 1] + "…"
    if issubclass(row.error, TemporaryError):
        hints = [h for h in (failure.retry_after, row.retry_after) if h is not None]
        return row.error(message, retry_after=max(hints) if hints else None)
    return row.error(message)


# --- event bodies --------------------------------------------------------------------------------


def _when(value: dt.date | dt.datetime, all_day: bool, time_zone: str) -> dict[str, str]:
    if all_day:
        return {"date": (value.date() if isinstance(value, dt.datetime) else value).isoformat()}
    if not isinstance(value, dt.datetime):
        raise InvalidRequest("a timed event needs datetimes for start and end, got a date")
    return {"dateTime": value.isoformat(), **({"timeZone": time_zone} if time_zone else {})}


def event_body(event: EventState, target: Target) -> dict[str, Any]:
    """The full Calendar v3 resource for ``event``, marked with our keys so a lost create can be recognised."""
    body: dict[str, Any] = {
        "summary": event.title,
        "start": _when(event.start, event.all_day, event.time_zone),
        "end": _when(event.end, event.all_day, event.time_zone),
        "attendees": [{"email": address} for address in event.attendees],
        "status": event.status,
        "extendedProperties": {
            "private": {SYNC_KEY_PROPERTY: target.sync_key, VERSION_PROPERTY: str(event.version)},
        },
    }
    if event.description is not None:
        body["description"] = event.description
    if event.location is not None:
        body["location"] = event.location
    return body


def _reapply(current: Mapping[str, Any], wanted: Mapping[str, Any]) -> dict[str, Any]:
    """Our state on top of the event as it is now: keeps fields, properties and RSVPs we don't manage."""
    body = {k: v for k, v in current.items() if k not in _SERVER_FIELDS and k not in _MANAGED_FIELDS}
    body.update(wanted)
    properties = dict(current.get("extendedProperties") or {})
    properties["private"] = {**(properties.get("private") or {}), **wanted["extendedProperties"]["private"]}
    body["extendedProperties"] = properties
    replies = {a.get("email"): a for a in current.get("attendees") or ()}
    body["attendees"] = [{**replies.get(a["email"], {}), **a} for a in wanted["attendees"]]
    return body


# --- credentials ---------------------------------------------------------------------------------


def _option(account: Account, name: str, kind: type, default: Any) -> Any:
    value = account.options.get(name, default)
    if not isinstance(value, kind):
        raise ConfigurationError(f"Google account {account.id}: option {name!r} must be a {kind.__name__}")
    return value


def _missing(info: Mapping[str, Any], fields: Collection[str]) -> list[str]:
    return [f for f in fields if not isinstance(info.get(f), str) or not info[f]]


def build_credentials(account: Account) -> Credentials:
    """google-auth credentials for the account, scoped explicitly (else a service account asks for 18 scopes)."""
    info = account.credentials
    if not isinstance(info, Mapping):
        raise ConfigurationError(f"Google account {account.id}: credentials must be a JSON object")
    kind = info.get("type", "authorized_user" if "refresh_token" in info else None)
    where = f"Google account {account.id}: {kind} credentials"
    try:
        if kind == "authorized_user":
            missing = _missing(info, ("client_id", "client_secret", "refresh_token"))
            if missing:
                raise ConfigurationError(f"{where} lack {', '.join(missing)}")
            user: user_credentials.Credentials = user_credentials.Credentials.from_authorized_user_info(  # type: ignore[no-untyped-call]
                dict(info), scopes=list(SCOPES)
            )
            if info.get("token_uri"):
                user = user.with_token_uri(info["token_uri"])
            return user
        if kind == "service_account":
            missing = _missing(info, ("client_email", "private_key", "token_uri"))
            if missing:
                raise ConfigurationError(f"{where} lack {', '.join(missing)}")
            robot: service_account.Credentials = service_account.Credentials.from_service_account_info(  # type: ignore[no-untyped-call]
                dict(info), scopes=list(SCOPES)
            )
            if _option(account, "delegate", bool, True):
                subject = _option(account, "subject", str, account.address)
                delegated: Credentials = robot.with_subject(subject)  # type: ignore[no-untyped-call]
                return delegated
            return robot
    except (ValueError, TypeError, GoogleAuthError) as exc:
        # Only the class name: google-auth's messages may quote the key material.
        raise ConfigurationError(f"{where} are malformed ({type(exc).__name__})") from None
    raise ConfigurationError(
        f"Google account {account.id}: credentials must be Google's authorized_user or service_account JSON"
    )


def _secrets_of(account: Account) -> tuple[str, ...]:
    return tuple(str(account.credentials[f]) for f in _SECRET_FIELDS if account.credentials.get(f))


@dataclass(frozen=True)
class _Session:
    """One account's view of the API for the duration of one provider call."""

    calendar_id: str
    credentials: Credentials
    secrets: tuple[str, ...]


class GoogleProvider:
    """Pushes local event state into Google Calendar; safe to share between worker threads."""

    name: ProviderName = "google"

    def __init__(self, settings: Settings) -> None:
        self._timeout = settings.provider_timeout
        options = {"api_endpoint": settings.google_api_endpoint} if settings.google_api_endpoint else None
        # This Http only satisfies build(); every call runs on a per-thread AuthorizedHttp (see _execute).
        self._service = build(
            "calendar",
            "v3",
            http=httplib2.Http(timeout=self._timeout),
            static_discovery=True,
            cache_discovery=False,
            client_options=options,
        )
        self._local = threading.local()
        self._credentials: collections.OrderedDict[tuple[str, str], Credentials] = collections.OrderedDict()
        self._lock = threading.Lock()

    # --- Provider protocol -----------------------------------------------------------------------

    def upsert(self, account: Account, event: EventState, target: Target) -> ExternalRef:
        """Create (adopting an earlier lost create) or update the target's event to show ``event``."""
        session = self._session(account)
        wanted = event_body(event, target)
        send_updates = _SEND_UPDATES[event.send_updates]
        if target.external_id is None:
            return self._create(session, wanted, send_updates, target)
        try:
            return _ref(self._update(session, target.external_id, wanted, send_updates, target.etag, {404, 412}))
        except HttpError as exc:
            if exc.resp.status == 404:
                return self._create(session, wanted, send_updates, target)
            return self._reconcile(session, target.external_id, wanted, send_updates, target)

    def delete(self, account: Account, target: Target, *, send_updates: SendUpdates = "none") -> None:
        """Delete the target's event (found by its deterministic id when none is recorded); gone already is fine."""
        session = self._session(account)
        event_id = target.external_id or event_id_for(target.sync_key)
        try:
            self._execute(
                session,
                "events.delete",
                lambda events: events.delete(
                    calendarId=session.calendar_id, eventId=event_id, sendUpdates=_SEND_UPDATES[send_updates]
                ),
                passthrough={404, 410},
            )
        except HttpError:
            return

    # --- flows -----------------------------------------------------------------------------------

    def _create(self, session: _Session, wanted: dict[str, Any], send_updates: str, target: Target) -> ExternalRef:
        event_id = event_id_for(target.sync_key)
        try:
            created = self._execute(
                session,
                "events.insert",
                lambda events: events.insert(
                    calendarId=session.calendar_id, body={**wanted, "id": event_id}, sendUpdates=send_updates
                ),
                passthrough={409},
            )
        except HttpError:
            # Our earlier attempt (its response lost) or a cancelled event of ours holds the id.
            return self._reconcile(session, event_id, wanted, send_updates, target)
        return _ref(created)

    def _update(
        self,
        session: _Session,
        event_id: str,
        body: dict[str, Any],
        send_updates: str,
        etag: str | None,
        passthrough: Collection[int],
    ) -> Any:
        def request(events: Any) -> Any:
            put = events.update(calendarId=session.calendar_id, eventId=event_id, body=body, sendUpdates=send_updates)
            if etag:
                # No ifMatch parameter exists; the header is the only way (notes §2.4).
                put.headers["If-Match"] = etag
            return put

        return self._execute(session, "events.update", request, passthrough=passthrough)

    def _reconcile(
        self, session: _Session, event_id: str, wanted: dict[str, Any], send_updates: str, target: Target
    ) -> ExternalRef:
        """Re-read the event and re-apply our state under If-Match until no one else changes it in between."""
        for _ in range(MAX_CONFLICTS):
            current = self._execute(
                session,
                "events.get",
                lambda events: events.get(calendarId=session.calendar_id, eventId=event_id),
            )
            _check_ours(current, target)
            try:
                body = _reapply(current, wanted)
                return _ref(self._update(session, event_id, body, send_updates, current.get("etag"), {412}))
            except HttpError:
                continue
        raise TemporaryError(f"Google event {event_id} changed under us {MAX_CONFLICTS} times in a row")

    # --- plumbing --------------------------------------------------------------------------------

    def _session(self, account: Account) -> _Session:
        calendar_id = _option(account, "calendar_id", str, account.address)
        return _Session(calendar_id, self._cached_credentials(account), _secrets_of(account))

    def _cached_credentials(self, account: Account) -> Credentials:
        """One credentials object per account and secret, so access tokens are reused across jobs and threads."""
        try:
            material = json.dumps([account.credentials, account.options], sort_keys=True, default=str)
        except (TypeError, ValueError):
            raise ConfigurationError(f"Google account {account.id}: credentials must be a JSON object") from None
        key = (account.id, hashlib.sha256(material.encode()).hexdigest())
        with self._lock:
            cached = self._credentials.get(key)
            if cached is not None:
                self._credentials.move_to_end(key)
                return cached
        built = build_credentials(account)
        with self._lock:
            cached = self._credentials.setdefault(key, built)
            while len(self._credentials) > _CREDENTIAL_CACHE_SIZE:
                self._credentials.popitem(last=False)
        return cached

    def _http(self, credentials: Credentials) -> Any:
        http = getattr(self._local, "http", None)
        if http is None:
            http = self._local.http = httplib2.Http(timeout=self._timeout)
        return google_auth_httplib2.AuthorizedHttp(credentials, http=http)

    def _execute(
        self,
        session: _Session,
        operation: str,
        request: Callable[[Any], Any],
        passthrough: Collection[int] = (),
    ) -> Any:
        """Run one API call; HTTP statuses in ``passthrough`` reach the caller as HttpError, the rest are classified."""
        try:
            return request(self._service.events()).execute(http=self._http(session.credentials), num_retries=0)
        except HttpError as exc:
            if exc.resp.status in passthrough:
                raise
            failure = exc
        except Exception as exc:
            failure = exc
        live_token = getattr(session.credentials, "token", None)
        secrets = (*session.secrets, live_token) if isinstance(live_token, str) else session.secrets
        raise classify(failure, operation, secrets) from None


def _check_ours(current: Mapping[str, Any], target: Target) -> None:
    """Refuse to adopt an event that carries another sync key (a cancelled stub may carry none)."""
    marker = ((current.get("extendedProperties") or {}).get("private") or {}).get(SYNC_KEY_PROPERTY)
    if marker != target.sync_key and not (marker is None and current.get("status") == "cancelled"):
        raise InvalidRequest(f"Google event {current.get('id')} exists but was not created by calsync for this target")


def _ref(resource: Mapping[str, Any]) -> ExternalRef:
    return ExternalRef(external_id=str(resource["id"]), etag=resource.get("etag"))

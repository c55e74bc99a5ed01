"""The Google Calendar adapter: makes a Calendar v3 calendar show an :class:`EventState`, on the real client library."""

from __future__ import annotations

import threading
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

import google_auth_httplib2
import httplib2
from google.auth.credentials import Credentials
from googleapiclient.discovery import build
from googleapiclient.errors import HttpError

from calsync.core.model.calendar import Account, EventState, ExternalRef, ProviderName, SendUpdates, Target
from calsync.core.model.drift import ReadBack
from calsync.core.model.errors import ConfigurationError, EntityNotFound, InvalidRequest, TemporaryError
from calsync.core.model.provider_io import request_sent
from calsync.providers.accounts import AccountCache, fingerprint, secret_values
from calsync.providers.google.classification import classify
from calsync.providers.google.credentials import account_option, build_credentials
from calsync.providers.google.event_body import (
    SEND_UPDATES,
    check_ours,
    event_body,
    event_id_for,
    fingerprint_of,
    reapply,
    ref_of,
    shows,
)
from calsync.providers.google.read_back import read_back

MAX_CONFLICTS = 3
#: How many re-creations under a new id one target may need (each after Google refused to restore the last).
MAX_GENERATIONS = 8


class SendingHttp(httplib2.Http):  # type: ignore[misc]
    """``httplib2.Http`` that tells calsync a request goes out (a refused connection included).

    Each worker thread sends through its own (httplib2 is not thread-safe). Both the API calls (``HttpRequest.execute``
    over google-auth-httplib2's ``AuthorizedHttp``) and google-auth's token refreshes end in its ``request``, so a
    request counted here is one handed to the network (core/model/provider_io.py): a failure before it is calsync's
    own, never Google's.
    """

    def request(self, *args: Any, **kwargs: Any) -> tuple[httplib2.Response, bytes]:
        """``Http.request``, counted."""
        request_sent()
        answer: tuple[httplib2.Response, bytes] = super().request(*args, **kwargs)
        return answer


@dataclass(frozen=True)
class _Session:
    """One account's view of the API for the duration of one provider call."""

    calendar_id: str
    credentials: Credentials
    secrets: tuple[str, ...]


class GoogleProvider:
    """Pushes local event state into Google Calendar and reads it back for drift sweeps; safe to share between
    worker threads."""

    name: ProviderName = "google"

    def __init__(self, *, timeout: float, api_endpoint: str | None = None) -> None:
        """``timeout`` bounds every request (API calls and token refreshes); ``api_endpoint`` is an emulator's."""
        self._timeout = timeout
        options = {"api_endpoint": api_endpoint} if api_endpoint else None
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
        self._https: dict[threading.Thread, httplib2.Http] = {}  # every thread's Http, for close()
        self._https_lock = threading.Lock()
        self._credentials: AccountCache[Credentials] = AccountCache()

    # --- Provider protocol -----------------------------------------------------------------------

    def upsert(self, account: Account, event: EventState, target: Target) -> ExternalRef:
        """Create (adopting an earlier lost create) or update the target's event to show ``event``."""
        session = self._session(account)
        wanted = event_body(event, target)
        send_updates = SEND_UPDATES[event.send_updates]
        if target.external_id is None:
            return self._create(session, wanted, send_updates, target)
        try:
            changed = {"eventId": target.external_id, "body": wanted, "sendUpdates": send_updates}
            return ref_of(self._execute(session, "update", {403, 404, 410, 412}, target.etag, **changed))
        except HttpError as exc:
            if exc.resp.status == 404:
                return self._create(session, wanted, send_updates, target)
            # 412: changed under us. 403/410: maybe deleted in Google and refused; _adopt tells which.
            adopted = self._adopt(session, target.external_id, wanted, send_updates, target)
            return adopted if adopted is not None else self._create(session, wanted, send_updates, target)

    def delete(self, account: Account, target: Target, *, send_updates: SendUpdates = "none") -> None:
        """Delete the target's event (found by its deterministic ids when none is recorded); gone already is fine."""
        session = self._session(account)
        if target.external_id is not None:
            self._delete(session, target.external_id, send_updates)
            return
        # Generation n+1 only exists when generation n is cancelled: walk until an id was live or never existed.
        for generation in range(MAX_GENERATIONS):
            if self._delete(session, event_id_for(target.sync_key, generation), send_updates) != 410:
                return

    def verify(self, account: Account) -> None:
        """One token call with the account's credentials (``accounts add --verify``); a refusal is permanent."""
        session = self._session(account)
        http = self._http(session.credentials).http  # this thread's Http, closed by close()
        try:
            session.credentials.refresh(google_auth_httplib2.Request(http))  # type: ignore[no-untyped-call]
        except Exception as exc:
            raise classify(exc, "token refresh", self._secrets(session)) from None

    # --- DriftReader (core/model/drift.py; the listing and the fingerprint: read_back.py) ------------------------

    def read_back(self, account: Account, cursor: str | None) -> ReadBack:
        """calsync's items in the account's calendar changed since the sync token ``cursor`` (all of them without
        one, or when Google answers 410), and the next sync token."""
        session = self._session(account)
        return read_back(lambda **params: self._execute(session, "list", **params), session.calendar_id, cursor)

    def fingerprint(self, account: Account, event: EventState) -> str:
        """The owned fields of the body ``upsert`` writes for ``event``, normalized as the items read back are."""
        calendar_id = account_option(account, "calendar_id", str, account.address)
        target = Target(event_id=event.id, account_id=account.id, tenant_id=event.tenant_id)
        return fingerprint_of(event_body(event, target), calendar_id)

    def close(self) -> None:
        """Close every thread's pooled connections (call once the worker threads stopped); a later call reconnects."""
        with self._https_lock:
            https = list(self._https.values())
            self._https = {thread: http for thread, http in self._https.items() if thread.is_alive()}
        for http in https:
            http.close()
        self._service.close()

    # --- flows -----------------------------------------------------------------------------------

    def _create(self, session: _Session, wanted: dict[str, Any], send_updates: str, target: Target) -> ExternalRef:
        """Insert under the first deterministic id that is free, or adopt the one an earlier attempt of ours holds."""
        for generation in range(MAX_GENERATIONS):
            event_id = event_id_for(target.sync_key, generation)
            body = {**wanted, "id": event_id}
            try:
                created = self._execute(session, "insert", {409}, body=body, sendUpdates=send_updates)
            except HttpError:
                # Our earlier attempt (its response lost) or a cancelled event of ours holds the id.
                adopted = self._adopt(session, event_id, wanted, send_updates, target)
                if adopted is None:
                    continue  # cancelled, and Google refuses to restore it: the next generation
                return adopted
            return ref_of(created)
        raise InvalidRequest(f"Google refuses to restore the first {MAX_GENERATIONS} ids of this target's event")

    def _delete(self, session: _Session, event_id: str, send_updates: SendUpdates) -> int:
        """Delete one id; returns the HTTP status (204, or 404/410: already gone, which is fine)."""
        try:
            self._execute(session, "delete", {404, 410}, eventId=event_id, sendUpdates=SEND_UPDATES[send_updates])
        except HttpError as exc:
            gone = classify(exc, "events.delete", self._secrets(session))
            if not isinstance(gone, EntityNotFound):
                raise gone from None  # a 410 that is not "deleted" (fullSyncRequired) is no success
            return int(exc.resp.status)
        return 204

    def _adopt(
        self, session: _Session, event_id: str, wanted: dict[str, Any], send_updates: str, target: Target
    ) -> ExternalRef | None:
        """Re-read the event and re-apply our state under If-Match until no one else changes it in between.

        None when the event is cancelled and Google refuses to restore it (403/410): the caller re-creates it
        under the next generation of the id. An event that already shows our state is not written again.
        """
        for _ in range(MAX_CONFLICTS):
            current = self._execute(session, "get", eventId=event_id)
            check_ours(current, target)
            cancelled = current.get("status") == "cancelled"
            if shows(current, wanted, session.calendar_id) or (cancelled and wanted["status"] == "cancelled"):
                return ref_of(current)  # nothing to write (a cancelled event stays hidden, stub or not)
            try:
                changed = {"eventId": event_id, "body": reapply(current, wanted), "sendUpdates": send_updates}
                return ref_of(self._execute(session, "update", {403, 410, 412}, current.get("etag"), **changed))
            except HttpError as exc:
                if exc.resp.status == 412:
                    continue
                if cancelled:
                    return None
                raise classify(exc, "events.update", self._secrets(session)) from None
        raise TemporaryError(f"Google event {event_id} changed under us {MAX_CONFLICTS} times in a row")

    # --- plumbing --------------------------------------------------------------------------------

    def _session(self, account: Account) -> _Session:
        """The account's calendar, and one credentials object per account and fingerprint (access tokens are reused
        across jobs and threads), built anew when its credentials, options or address (a delegation's default
        subject) changed."""
        if not isinstance(account.credentials, Mapping) or not isinstance(account.options, Mapping):
            raise ConfigurationError(f"Google account {account.id}: credentials must be a JSON object")
        calendar_id = account_option(account, "calendar_id", str, account.address)
        kept = fingerprint(account.address, account.credentials, account.options)
        credentials = self._credentials.get(account.id, kept, lambda _: build_credentials(account))
        return _Session(calendar_id, credentials, secret_values(account.credentials))

    def _events(self) -> Any:
        """This thread's ``events`` resource: building one costs milliseconds, and threads must not share one."""
        events = getattr(self._local, "events", None)
        if events is None:
            events = self._local.events = self._service.events()
        return events

    def _http(self, credentials: Credentials) -> Any:
        """This thread's ``AuthorizedHttp`` for ``credentials``, over this thread's one ``Http``."""
        authorized = getattr(self._local, "authorized", None)
        if authorized is not None and authorized.credentials is credentials:
            return authorized
        http = getattr(self._local, "http", None)
        if http is None:
            http = self._local.http = SendingHttp(timeout=self._timeout)
            with self._https_lock:
                self._https[threading.current_thread()] = http
        authorized = self._local.authorized = google_auth_httplib2.AuthorizedHttp(credentials, http=http)
        return authorized

    def _execute(
        self,
        session: _Session,
        method: str,
        passthrough: Collection[int] = (),
        etag: str | None = None,
        **params: Any,
    ) -> Any:
        """Run ``events.<method>(calendarId=..., **params)`` on the session's calendar, sent ``If-Match: etag``
        when given; HTTP statuses in ``passthrough`` reach the caller as HttpError, the rest are classified."""
        try:
            request = getattr(self._events(), method)(calendarId=session.calendar_id, **params)
            if etag:
                request.headers["If-Match"] = etag  # no ifMatch parameter exists; the header is the only way
            return request.execute(http=self._http(session.credentials), num_retries=0)
        except Exception as exc:
            if isinstance(exc, HttpError) and exc.resp.status in passthrough:
                raise
            raise classify(exc, f"events.{method}", self._secrets(session)) from None

    @staticmethod
    def _secrets(session: _Session) -> tuple[str, ...]:
        live_token = getattr(session.credentials, "token", None)
        return (*session.secrets, live_token) if isinstance(live_token, str) else session.secrets

"""The Google Calendar adapter: makes a Calendar v3 calendar show an :class:`EventState`, on the real client library."""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

import google_auth_httplib2
import httplib2
from google.auth.credentials import Credentials
from googleapiclient.discovery import build
from googleapiclient.errors import HttpError

from calsync.core.model.calendar import Account, EventState, ExternalRef, ProviderName, SendUpdates, Target
from calsync.core.model.errors import TemporaryError
from calsync.providers.google.classification import classify
from calsync.providers.google.config import GoogleConfig
from calsync.providers.google.credentials import CredentialCache, account_option, secrets_of
from calsync.providers.google.event_body import SEND_UPDATES, check_ours, event_body, event_id_for, reapply, ref_of

MAX_CONFLICTS = 3


@dataclass(frozen=True)
class _Session:
    """One account's view of the API for the duration of one provider call."""

    calendar_id: str
    credentials: Credentials
    secrets: tuple[str, ...]


class GoogleProvider:
    """Pushes local event state into Google Calendar; safe to share between worker threads."""

    name: ProviderName = "google"

    def __init__(self, config: GoogleConfig) -> None:
        self._timeout = config.provider_timeout
        options = {"api_endpoint": config.google_api_endpoint} if config.google_api_endpoint else None
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
        self._credentials = CredentialCache()

    # --- Provider protocol -----------------------------------------------------------------------

    def upsert(self, account: Account, event: EventState, target: Target) -> ExternalRef:
        """Create (adopting an earlier lost create) or update the target's event to show ``event``."""
        session = self._session(account)
        wanted = event_body(event, target)
        send_updates = SEND_UPDATES[event.send_updates]
        if target.external_id is None:
            return self._create(session, wanted, send_updates, target)
        try:
            return ref_of(self._update(session, target.external_id, wanted, send_updates, target.etag, {404, 412}))
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
                    calendarId=session.calendar_id, eventId=event_id, sendUpdates=SEND_UPDATES[send_updates]
                ),
                passthrough={404, 410},
            )
        except HttpError:
            return

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
        return ref_of(created)

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
                # No ifMatch parameter exists; the header is the only way.
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
            check_ours(current, target)
            try:
                body = reapply(current, wanted)
                return ref_of(self._update(session, event_id, body, send_updates, current.get("etag"), {412}))
            except HttpError:
                continue
        raise TemporaryError(f"Google event {event_id} changed under us {MAX_CONFLICTS} times in a row")

    # --- plumbing --------------------------------------------------------------------------------

    def _session(self, account: Account) -> _Session:
        calendar_id = account_option(account, "calendar_id", str, account.address)
        return _Session(calendar_id, self._credentials.get(account), secrets_of(account))

    def _http(self, credentials: Credentials) -> Any:
        http = getattr(self._local, "http", None)
        if http is None:
            http = self._local.http = httplib2.Http(timeout=self._timeout)
            with self._https_lock:
                self._https[threading.current_thread()] = http
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

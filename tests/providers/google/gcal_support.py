"""Helpers shared by the Google tests: the emulator's control API, the real client, event factories."""

from __future__ import annotations

import datetime as dt
import json
import urllib.error
import urllib.request
import uuid
from typing import Any, cast

import google_auth_httplib2
import httplib2
import pytest
from google.oauth2 import credentials as user_credentials
from googleapiclient.discovery import build
from googleapiclient.errors import HttpError

from calsync.core.config.settings import Settings
from calsync.core.model.calendar import Account, EventState, Target
from calsync.providers.google.credentials import SCOPES
from calsync.providers.google.provider import GoogleProvider
from calsync.providers.registry import ProviderRegistry
from calsync_emulators.control import GoogleControl
from calsync_emulators.server import RunningEmulator

CAL = "alice@example.com"
TEST_CLIENT_ID = "calsync-test.apps.googleusercontent.com"
TEST_SECRET = "GOCSPX-test-secret"


class Emulator(GoogleControl):
    """A running Google emulator: its control client plus what the tests need on top."""

    def __init__(self, running: RunningEmulator) -> None:
        super().__init__(running.url, timeout=10)
        self.running = running
        self.url = running.url

    @classmethod
    def fresh(cls, running: RunningEmulator) -> Emulator:
        """The control client of ``running``, after a reset (events, tokens, faults, the log, the switches)."""
        emulator = cls(running)
        emulator.reset()
        return emulator

    def fault(self, **rule: Any) -> Any:
        """Add a fault rule."""
        return self.add_fault(**rule)

    def configure(self, **behaviour: Any) -> dict[str, Any]:
        """Change the emulator's behaviour switches (``/_emulator/config``); returns them all."""
        answer: dict[str, Any] = self.control("POST", "config", behaviour)
        return answer

    def calls(self) -> list[tuple[str, str, int | None]]:
        """The request log as (method, last path segment or 'token', status), compact enough to assert on."""
        return [(r["method"], r["path"].rsplit("/", 1)[-1], r["status"]) for r in self.requests()]

    def settings(self, **overrides: Any) -> Settings:
        """Settings pointing the adapter at this emulator."""
        return Settings(**{"google_api_endpoint": self.api_endpoint, **overrides})

    def user_credentials(
        self, refresh_token: str | None = None, client_id: str = TEST_CLIENT_ID, client_secret: str = TEST_SECRET
    ) -> dict[str, str]:
        """Google's authorized_user JSON with the emulator as token endpoint (a fresh refresh token unless given)."""
        return super().user_credentials(refresh_token or f"1//test-{uuid.uuid4().hex}", client_id, client_secret)


def google_adapter(settings: Settings) -> GoogleProvider:
    """The Google adapter the provider registry builds from ``settings``."""
    return cast(GoogleProvider, ProviderRegistry(settings).get("google"))


def make_event(event_id: str = "ev-1", **overrides: Any) -> EventState:
    """A timed event with sensible defaults."""
    fields: dict[str, Any] = {
        "id": event_id,
        "tenant_id": "tenant-1",
        "version": 1,
        "title": "Planning",
        "start": dt.datetime(2026, 12, 1, 9, 0),
        "end": dt.datetime(2026, 12, 1, 10, 0),
        "time_zone": "Europe/Berlin",
        "all_day": False,
        **overrides,
    }
    return EventState(**fields)


def target_for(event: EventState, account: Account, **overrides: Any) -> Target:
    """The target of ``event`` in ``account``, not yet synced unless overridden."""
    return Target(event_id=event.id, account_id=account.id, tenant_id=event.tenant_id, **overrides)


class Api:
    """The real Calendar client, authorised against the emulator, for looking at or changing its state directly."""

    def __init__(self, emulator: Emulator) -> None:
        creds = user_credentials.Credentials.from_authorized_user_info(
            emulator.user_credentials("1//inspector"), scopes=list(SCOPES)
        ).with_token_uri(emulator.token_uri)
        self.http = google_auth_httplib2.AuthorizedHttp(creds, http=httplib2.Http(timeout=10))
        options = {"api_endpoint": emulator.api_endpoint}
        self.service = build("calendar", "v3", http=self.http, static_discovery=True, client_options=options)

    def events(self) -> Any:
        """The events collection."""
        return self.service.events()

    def run(self, request: Any) -> Any:
        """Execute once, no retries."""
        return request.execute(num_retries=0)

    def list_all(self, calendar_id: str) -> list[dict[str, Any]]:
        """Every stored event of a calendar, cancelled ones included."""
        items: list[dict[str, Any]] = []
        page_token = None
        while True:
            page = self.run(self.events().list(calendarId=calendar_id, showDeleted=True, pageToken=page_token))
            items.extend(page["items"])
            page_token = page.get("nextPageToken")
            if not page_token:
                return items


def only_event(api: Api, calendar_id: str = CAL) -> dict[str, Any]:
    """The single event stored in a calendar (cancelled ones count)."""
    events = api.list_all(calendar_id)
    assert len(events) == 1, events
    return events[0]


def body(event_id: str | None = None, **fields: Any) -> dict[str, Any]:
    """A minimal valid all-day event body."""
    resource: dict[str, Any] = {
        "summary": "x",
        "start": {"date": "2026-12-01"},
        "end": {"date": "2026-12-02"},
        **fields,
    }
    if event_id is not None:
        resource["id"] = event_id
    return resource


def http_error(call: Any) -> HttpError:
    """Run a request that must fail and return the HttpError."""
    with pytest.raises(HttpError) as caught:
        call.execute(num_retries=0)
    return caught.value


def error_json(exc: HttpError) -> dict[str, Any]:
    """The error object of a Google error body."""
    payload: dict[str, Any] = json.loads(exc.content)["error"]
    return payload


def raw(emulator: Emulator, method: str, path: str, token: str | None = None, form: str | None = None) -> Any:
    """A bare HTTP call (no client library) returning (status, parsed body)."""
    request = urllib.request.Request(f"{emulator.url}{path}", data=form.encode() if form else None, method=method)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    if form:
        request.add_header("Content-Type", "application/x-www-form-urlencoded")
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.loads(answer.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")

"""The Google adapter counts every request it hands to the network (token refreshes included), a refused
connection too, and none when its own code fails before the first one."""

from __future__ import annotations

import dataclasses

import pytest

from calsync.core.model.calendar import Account
from calsync.core.model.errors import ProviderUnavailable
from calsync.core.model.provider_io import RequestsSent
from calsync.providers.google import provider as google_provider
from calsync.providers.google.provider import GoogleProvider
from tests.providers.google.gcal_support import Emulator, google_adapter, make_event, target_for


def test_every_request_of_a_call_is_counted(emulator: Emulator, account: Account) -> None:
    provider = google_adapter(emulator.settings())
    event = make_event()
    try:
        with RequestsSent() as sent:
            provider.upsert(account, event, target_for(event, account))  # a token refresh, then the insert
    finally:
        provider.close()
    assert sent.count == len(emulator.requests()) == 2


def test_a_refused_connection_counts_as_a_request(emulator: Emulator, account: Account, closed_port: int) -> None:
    nowhere = f"http://127.0.0.1:{closed_port}"
    provider = google_adapter(emulator.settings(google_api_endpoint=f"{nowhere}/calendar/v3/"))
    credentials = {**account.credentials, "token": "ya29.cached", "expiry": "2099-01-01T00:00:00Z"}
    cached = dataclasses.replace(account, credentials=credentials)  # a valid token: the API call meets the port
    event = make_event()
    try:
        with RequestsSent() as sent, pytest.raises(ProviderUnavailable):
            provider.upsert(cached, event, target_for(event, cached))
    finally:
        provider.close()
    assert sent.count >= 1


def test_our_own_failure_before_the_first_request_counts_none(
    provider: GoogleProvider, account: Account, emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*_: object, **__: object) -> dict[str, object]:
        raise OverflowError("date value out of range")

    monkeypatch.setattr(google_provider, "event_body", broken)
    event = make_event()
    with RequestsSent() as sent, pytest.raises(OverflowError):
        provider.upsert(account, event, target_for(event, account))
    assert sent.count == 0 and emulator.requests() == []

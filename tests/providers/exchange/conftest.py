"""Fixtures for the Exchange adapter tests: the real exchangelib talking HTTP to our EWS emulator."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from exchangelib import BASIC, IMPERSONATION, UTC, Configuration, Credentials, Version
from exchangelib import Account as EwsAccount
from exchangelib.version import EXCHANGE_2016

from calsync.core.model.calendar import Account, EventState
from calsync.providers.exchange.provider import ExchangeProvider
from calsync.providers.registry import ProviderRegistry
from calsync_emulators.control import EwsControl
from calsync_emulators.server import RunningEmulator
from tests.providers.exchange.ews_support import (
    CLIENT,
    LOGINS,
    TENANT,
    ExchangeRig,
    MakeAccount,
    MakeEvent,
    MakeProvider,
    MakeTarget,
    target_for,
)
from tests.support import make_settings


@pytest.fixture
def emulator(ews_server: RunningEmulator) -> RunningEmulator:
    """The emulator, reset: no items, faults, tokens, barriers or log, and the default directory."""
    EwsControl(ews_server.url).reset()
    return ews_server


@pytest.fixture
def ews(emulator: RunningEmulator) -> EwsControl:
    """The emulator's control API."""
    return EwsControl(emulator.url)


@pytest.fixture
def make_provider(tmp_path: Path) -> Iterator[MakeProvider]:
    """Adapters built from real settings; every one is closed after the test."""
    built: list[ExchangeProvider] = []

    def make(**settings: Any) -> ExchangeProvider:
        registry = ProviderRegistry(make_settings(tmp_path, **{"worker_threads": 8, **settings}))
        provider = cast(ExchangeProvider, registry.get("exchange"))
        built.append(provider)
        return provider

    yield make
    for provider in built:
        provider.close()


@pytest.fixture
def provider(make_provider: MakeProvider) -> ExchangeProvider:
    """An adapter with test-scale settings and 8 worker threads."""
    return make_provider()


@pytest.fixture
def make_account(emulator: RunningEmulator) -> MakeAccount:
    """Accounts pointing at the emulator: Basic + impersonation by the service account unless told otherwise."""

    def make(
        address: str = "alpha@example.com",
        *,
        login: str = "svc",
        credentials: dict[str, str] | None = None,
        auth_type: str = "basic",
        access_type: str | None = "impersonation",
        server_url: str | None = None,
        account_id: str | None = None,
        **options: Any,
    ) -> Account:
        if auth_type == "oauth2":
            secret = {**CLIENT, "token_url": f"{emulator.url}/{TENANT}/oauth2/v2.0/token"}
        else:
            secret = dict(LOGINS[login])
        secret.update(credentials or {})
        all_options: dict[str, Any] = {
            "server_url": server_url or f"{emulator.url}/EWS/Exchange.asmx",
            "auth_type": auth_type,
            **options,
        }
        if access_type is not None:
            all_options["access_type"] = access_type
        return Account(
            id=account_id or f"acct-{address.split('@')[0]}",
            tenant_id="t1",
            provider="exchange",
            address=address,
            credentials=secret,
            options=all_options,
        )

    return make


@pytest.fixture
def make_event() -> MakeEvent:
    """Event states with sensible defaults: a 30-minute timed meeting in Copenhagen."""
    base = EventState(
        id="evt-1",
        tenant_id="t1",
        version=1,
        title="Standup",
        start=dt.datetime(2030, 1, 2, 10, 0),
        end=dt.datetime(2030, 1, 2, 10, 30),
        time_zone="Europe/Copenhagen",
        all_day=False,
        location="Room 1",
        description="Daily sync",
    )

    def make(**changes: Any) -> EventState:
        return dataclasses.replace(base, **changes)

    return make


@pytest.fixture
def make_target() -> MakeTarget:
    """Targets for (account, event), optionally with a recorded external id / ChangeKey."""
    return target_for


@pytest.fixture
def rig(
    provider: ExchangeProvider,
    ews: EwsControl,
    make_account: MakeAccount,
    make_event: MakeEvent,
    make_target: MakeTarget,
) -> ExchangeRig:
    """The adapter, the emulator's control API and the account/event/target factories, in one."""
    return ExchangeRig(provider, ews, make_account, make_event, make_target)


@pytest.fixture
def calendar(emulator: RunningEmulator) -> Iterator[Any]:
    """A plain exchangelib calendar folder of delta@example.com on the emulator (no adapter involved)."""
    config = Configuration(
        service_endpoint=f"{emulator.url}/EWS/Exchange.asmx",
        credentials=Credentials("svc@example.com", "svc-password"),
        auth_type=BASIC,
        version=Version(build=EXCHANGE_2016),
    )
    account = EwsAccount(
        "delta@example.com", config=config, autodiscover=False, access_type=IMPERSONATION, default_timezone=UTC
    )
    yield account.calendar
    account.protocol.close()


@pytest.fixture
def insecure_oauth(monkeypatch: pytest.MonkeyPatch) -> None:
    """Let oauthlib use the emulator's plain-HTTP token endpoint (production token URLs are https)."""
    monkeypatch.setenv("OAUTHLIB_INSECURE_TRANSPORT", "1")

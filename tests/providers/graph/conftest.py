"""Fixtures for the Graph adapter tests: the real httpx + msal over https to the Exchange server emulator."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, cast

import pytest

from calsync.core.model.calendar import Account, EventState, Target
from calsync.providers.graph.provider import GraphProvider
from calsync.providers.registry import ProviderRegistry
from calsync_emulators.control import GraphControl
from calsync_emulators.graph.tls import TlsIdentity
from calsync_emulators.server import RunningEmulator
from tests.support import make_settings

MakeProvider = Callable[..., GraphProvider]
MakeAccount = Callable[..., Account]
MakeEvent = Callable[..., EventState]


class Rotations:
    """A CredentialWriter that records what the adapter asked to store."""

    def __init__(self) -> None:
        self.saved: list[tuple[str, dict[str, Any]]] = []

    def save(self, account_id: str, credentials: Mapping[str, Any]) -> None:
        """Record one write-back."""
        self.saved.append((account_id, dict(credentials)))


@pytest.fixture
def graph(exchange_server: RunningEmulator) -> GraphControl:
    """The Exchange server emulator, reset, through its control API."""
    control = GraphControl(exchange_server.url)
    control.reset()
    return control


@pytest.fixture
def rotations() -> Rotations:
    """Where the adapters built by ``make_provider`` write rotated credentials."""
    return Rotations()


@pytest.fixture
def make_provider(
    tmp_path: Path, graph: GraphControl, emulator_tls: TlsIdentity, rotations: Rotations
) -> Iterator[MakeProvider]:
    """Adapters built from real settings pointing at the emulator; closed after the test."""
    built: list[GraphProvider] = []

    def make(limiter: Any = None, **settings: Any) -> GraphProvider:
        values = {"worker_threads": 8, "graph_api_endpoint": graph.api_endpoint,
                  "graph_ca_file": emulator_tls.ca_file, **settings}  # fmt: skip
        registry = ProviderRegistry(make_settings(tmp_path, **values), limiter=limiter, credentials=rotations)
        provider = cast(GraphProvider, registry.get("graph"))
        built.append(provider)
        return provider

    yield make
    for provider in built:
        provider.close()


@pytest.fixture
def provider(make_provider: MakeProvider) -> GraphProvider:
    """An adapter with test-scale settings."""
    return make_provider()


@pytest.fixture
def make_account(graph: GraphControl) -> MakeAccount:
    """App-only accounts (client credentials) of mailbox ``address`` unless ``credentials`` are given."""

    def make(address: str = "alpha@example.com", *, credentials: dict[str, Any] | None = None,
             account_id: str | None = None, **options: Any) -> Account:  # fmt: skip
        return Account(
            id=account_id or f"acct-{address.split('@')[0]}",
            tenant_id="t1",
            provider="graph",
            address=address,
            credentials=credentials if credentials is not None else graph.app_credentials(),
            options=options,
        )

    return make


@pytest.fixture
def make_event() -> MakeEvent:
    """A 30-minute meeting in Copenhagen with one attendee, invitations sent."""
    base = EventState(
        id="evt-1", tenant_id="t1", version=1, title="Standup",
        start=dt.datetime(2030, 1, 2, 10, 0), end=dt.datetime(2030, 1, 2, 10, 30),
        time_zone="Europe/Copenhagen", all_day=False, location="Room 1", description="Daily sync",
        attendees=("bob@example.com",), send_updates="all",
    )  # fmt: skip

    def make(**changes: Any) -> EventState:
        return dataclasses.replace(base, **changes)

    return make


def target_for(account: Account, event: EventState, **changes: Any) -> Target:
    """The target of an event in an account, optionally with a recorded ref."""
    return Target(event_id=event.id, account_id=account.id, tenant_id=event.tenant_id, **changes)


def graph_ops(graph: GraphControl, since: int = 0) -> list[tuple[str | None, int | None]]:
    """(operation, status) of every Graph API request, in arrival order."""
    return [(r.get("operation"), r["status"]) for r in graph.requests()[since:] if r["path"].startswith("/v1.0/")]

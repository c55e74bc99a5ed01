"""Fixtures for the Google adapter and emulator tests: a real emulator over HTTP and the real client library."""

from __future__ import annotations

import socket

import pytest

from calsync.core.model.calendar import Account
from calsync.providers.google.provider import GoogleProvider
from calsync_emulators import google
from calsync_emulators.pytest_plugin import StartEmulator
from calsync_emulators.server import RunningEmulator
from tests.providers.google.gcal_support import Api, Emulator, google_adapter


@pytest.fixture
def emulator(google_server: RunningEmulator) -> Emulator:
    """The shared emulator, reset for this test, in strict mode: a field the discovery schema lacks answers 400."""
    emu = Emulator(google_server)
    emu.reset()
    emu.configure(strict=True)
    return emu


@pytest.fixture
def private_emulator(start_emulator: StartEmulator) -> Emulator:
    """An emulator of this test's own, for faults that leave requests running (delays) or need a fixed seed."""
    return Emulator(start_emulator(google.create_app(seed=7)))


@pytest.fixture
def provider(emulator: Emulator) -> GoogleProvider:
    """The adapter under test, talking HTTP to the emulator."""
    return google_adapter(emulator.settings())


@pytest.fixture
def account(emulator: Emulator) -> Account:
    """A user-OAuth Google account whose primary calendar is its address."""
    return Account(
        id="acct-1",
        tenant_id="tenant-1",
        provider="google",
        address="alice@example.com",
        credentials=emulator.user_credentials(),
    )


@pytest.fixture
def api(emulator: Emulator) -> Api:
    """The real client, for inspecting and changing the emulator's state."""
    return Api(emulator)


@pytest.fixture
def closed_port() -> int:
    """A local port nobody listens on (connection refused)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])

"""The pytest fixtures that start emulators, for calsync's tests (``pytest_plugins`` in tests/conftest.py).

Servers are shared as widely as their use allows, because stopping one costs its 0.5 s poll interval:
one per session for the adapter tests, one per module with arrival stamps for the pipeline tests, and
a factory for the tests that need an emulator of their own (a fixed seed, requests left running).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import exchangelib
import pytest

from calsync_emulators import ews, google
from calsync_emulators.server import EmulatorApp, Request, RunningEmulator

StartEmulator = Callable[[EmulatorApp], RunningEmulator]


def stamp_arrivals(running: RunningEmulator) -> None:
    """Add ``at`` (monotonic seconds) to the emulator's request log, for lower bounds on retry delays.

    An entry is recorded after its request was read and before its answer is written, so the ``at`` of
    a retry minus the ``at`` of the answer that caused it is never more than the client really waited.
    """
    server = running.server
    record = server.record

    def stamped(request: Request, status: int | None, extra: Mapping[str, Any] | None = None) -> None:
        record(request, status, {**(extra or {}), "at": time.monotonic()})

    server.record = stamped  # type: ignore[method-assign]


@contextlib.contextmanager
def serving(app: EmulatorApp, *, stamped: bool = False) -> Iterator[RunningEmulator]:
    """Serve ``app`` on a free local port until the block ends."""
    running = RunningEmulator(app)
    if stamped:
        stamp_arrivals(running)
    try:
        yield running
    finally:
        running.stop()
        if isinstance(app, ews.EwsEmulator):
            exchangelib.close_connections()  # its pooled sessions point at a port that is gone now


@pytest.fixture(scope="session")
def google_server() -> Iterator[RunningEmulator]:
    """One Google Calendar emulator for the session (reset it before use: see tests/providers/google)."""
    with serving(google.create_app()) as running:
        yield running


@pytest.fixture(scope="session")
def ews_server() -> Iterator[RunningEmulator]:
    """One EWS emulator for the session (reset it before use: see tests/providers/exchange)."""
    with serving(ews.create_app()) as running:
        yield running


@pytest.fixture(scope="module")
def stamped_google_server() -> Iterator[RunningEmulator]:
    """A Google emulator of the module's own whose request log carries arrival times (``at``)."""
    with serving(google.create_app(), stamped=True) as running:
        yield running


@pytest.fixture(scope="module")
def stamped_ews_server() -> Iterator[RunningEmulator]:
    """An EWS emulator of the module's own whose request log carries arrival times (``at``)."""
    with serving(ews.create_app(), stamped=True) as running:
        yield running


@pytest.fixture
def start_emulator() -> Iterator[StartEmulator]:
    """Start emulators of this test's own; every one is stopped after the test."""
    with contextlib.ExitStack() as stack:
        yield lambda app: stack.enter_context(serving(app))

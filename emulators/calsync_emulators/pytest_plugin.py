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

from calsync_emulators import ews, google, graph
from calsync_emulators.graph.tls import TlsIdentity, self_signed
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
def serving(app: EmulatorApp, *, stamped: bool = False, tls: TlsIdentity | None = None) -> Iterator[RunningEmulator]:
    """Serve ``app`` on a free local port until the block ends (also over https with ``tls``)."""
    running = RunningEmulator(app, tls=tls.context if tls is not None else None)
    if stamped:
        stamp_arrivals(running)
    try:
        yield running
    finally:
        running.stop()
        if isinstance(app, ews.EwsEmulator | graph.ExchangeServer):
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


@pytest.fixture(scope="session")
def emulator_tls(tmp_path_factory: pytest.TempPathFactory) -> TlsIdentity:
    """The emulators' self-signed certificate (``CALSYNC_GRAPH_CA_FILE``) and server context."""
    return self_signed(tmp_path_factory.mktemp("emulator-tls"))


@pytest.fixture(scope="session")
def exchange_server(emulator_tls: TlsIdentity) -> Iterator[RunningEmulator]:
    """One Exchange server emulator (EWS + Graph + Entra on one store, http and https) for the session."""
    with serving(graph.create_app(), tls=emulator_tls) as running:
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


@pytest.fixture(scope="module")
def stamped_exchange_server(emulator_tls: TlsIdentity) -> Iterator[RunningEmulator]:
    """An Exchange server emulator (EWS + Graph) of the module's own with arrival times (``at``) in its log."""
    with serving(graph.create_app(), stamped=True, tls=emulator_tls) as running:
        yield running


@pytest.fixture
def start_emulator(emulator_tls: TlsIdentity) -> Iterator[StartEmulator]:
    """Start emulators of this test's own (served over http and https); every one is stopped after the test."""
    with contextlib.ExitStack() as stack:
        yield lambda app: stack.enter_context(serving(app, tls=emulator_tls))

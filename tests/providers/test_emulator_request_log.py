"""The emulators' request log keeps the newest requests only: an emulator serving a long benchmark stays bounded."""

from __future__ import annotations

import contextlib
import urllib.error
import urllib.request

import pytest

from calsync_emulators import server
from calsync_emulators.control import EmulatorControl
from calsync_emulators.google import create_app
from calsync_emulators.server import RunningEmulator


def test_the_request_log_keeps_the_newest_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(server, "REQUEST_LOG_LIMIT", 3)
    with RunningEmulator(create_app()) as emulator:
        for n in range(5):
            with contextlib.suppress(urllib.error.HTTPError):  # unauthenticated: 401, logged all the same
                urllib.request.urlopen(f"{emulator.url}/calendar/v3/calendars/c{n}/events", timeout=5).close()
        paths = [entry["path"] for entry in emulator.server.requests()]
    assert paths == [f"/calendar/v3/calendars/c{n}/events" for n in (2, 3, 4)]


def test_the_request_count_outlives_the_log_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(server, "REQUEST_LOG_LIMIT", 3)
    with RunningEmulator(create_app()) as emulator:
        control = EmulatorControl(emulator.url)
        for n in range(5):
            with contextlib.suppress(urllib.error.HTTPError):  # unauthenticated: 401, not 2xx
                urllib.request.urlopen(f"{emulator.url}/calendar/v3/calendars/c{n}/events", timeout=5).close()
        assert control.request_count() == {"total": 5, "failed": 5}
        control.reset()
        assert control.request_count() == {"total": 0, "failed": 0}


def test_a_client_dropping_its_connection_is_no_error_of_the_emulator(capsys: pytest.CaptureFixture[str]) -> None:
    # socketserver calls handle_error inside the except block of a failed connection; a worker stopping resets its own.
    with RunningEmulator(create_app()) as emulator:
        for dropped in (ConnectionResetError(104, "Connection reset by peer"), BrokenPipeError(32, "Broken pipe")):
            try:
                raise dropped
            except ConnectionError:
                emulator.server.handle_error(None, ("127.0.0.1", 50000))
        assert capsys.readouterr().err == ""
        try:
            raise ValueError("a bug in a handler")
        except ValueError:
            emulator.server.handle_error(None, ("127.0.0.1", 50000))
    assert "ValueError: a bug in a handler" in capsys.readouterr().err  # anything else is still reported

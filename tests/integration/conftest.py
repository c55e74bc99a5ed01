"""Fixtures shared by the integration tests of more than one module."""

from __future__ import annotations

import pytest

from calsync_emulators.control import GraphControl
from calsync_emulators.server import RunningEmulator


@pytest.fixture
def graph(stamped_exchange_server: RunningEmulator) -> GraphControl:
    """The module's Exchange server emulator (EWS + Graph), reset for this test."""
    control = GraphControl(stamped_exchange_server.url)
    control.reset()
    return control

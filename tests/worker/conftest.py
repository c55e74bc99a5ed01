"""Fixtures of the worker tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from dramatiq.brokers.stub import StubBroker


@pytest.fixture
def stub() -> Iterator[StubBroker]:
    """A stub broker with the calsync queue: what the job and the middlewares enqueue lands there."""
    broker = StubBroker(middleware=[])
    broker.declare_queue("calendar")
    yield broker
    broker.close()

"""Fixtures of the Redis-client tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    """A plain client of this test's Redis, closed afterwards."""
    connection = redis.Redis.from_url(redis_url)
    yield connection
    connection.close()

"""Fixtures of the Redis-client tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from calsync.core.redis.locks import LockManager


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    """A plain client of this test's Redis, closed afterwards."""
    connection = redis.Redis.from_url(redis_url)
    yield connection
    connection.close()


@pytest.fixture
def private_client(private_redis_url: str) -> Iterator[redis.Redis]:
    """A client of this test process' own Redis, for a test that flushes its scripts."""
    connection = redis.Redis.from_url(private_redis_url)
    yield connection
    connection.close()


@pytest.fixture
def managers(client: redis.Redis) -> Iterator[tuple[LockManager, LockManager]]:
    """Two processes' lock managers."""
    pair = (LockManager(client, ttl_seconds=30), LockManager(client, ttl_seconds=30))
    yield pair
    for manager in pair:
        manager.close()

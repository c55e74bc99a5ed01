"""Fixtures of the Redis-client tests, and the connection faults they inflict."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from redis.connection import AbstractConnection

from calsync.core.redis.keys import RedisKeys
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
def named(redis_url: str) -> Iterator[redis.Redis]:
    """A client whose connections carry a name of their own, so :func:`drop_connections` closes only them."""
    connection = redis.Redis.from_url(redis_url, client_name=f"cst-{uuid.uuid4().hex[:10]}")
    yield connection
    connection.close()


def drop_connections(admin: redis.Redis, victim: redis.Redis) -> int:
    """Close every connection of ``victim`` from the server's side, as a restart or an idle timeout would."""
    name = victim.get_connection_kwargs()["client_name"]
    ids = [entry["id"] for entry in admin.client_list() if entry.get("name") == name]
    for client_id in ids:
        admin.client_kill_filter(_id=client_id)
    return len(ids)


@pytest.fixture
def lose_next_answer(monkeypatch: pytest.MonkeyPatch) -> Callable[[], list[Any]]:
    """Arms a fault: the next answer this process reads from Redis arrives, then its connection drops.

    The command ran; redis-py sends it again on a new connection. Returns the lost answer, once read.
    Warm the connection and the script first: a handshake's or a script load's answer would be lost instead.
    """
    real = AbstractConnection.read_response

    def arm() -> list[Any]:
        lost: list[Any] = []

        def read_response(self: AbstractConnection, *args: Any, **kwargs: Any) -> Any:
            answer = real(self, *args, **kwargs)
            if not lost:
                lost.append(answer)
                raise redis.ConnectionError("connection reset before the reply")
            return answer

        monkeypatch.setattr(AbstractConnection, "read_response", read_response)
        return lost

    return arm


@pytest.fixture
def managers(client: redis.Redis) -> Iterator[tuple[LockManager, LockManager]]:
    """Two processes' lock managers."""
    pair = (LockManager(client, ttl_seconds=30), LockManager(client, ttl_seconds=30))
    yield pair
    for manager in pair:
        manager.close()


Owners = tuple[LockManager, LockManager, str, str]


@pytest.fixture
def owners(namespace: str, client: redis.Redis) -> Iterator[Owners]:
    """Two live processes' lock managers, each naming its heartbeat key, and those keys."""
    keys = RedisKeys(namespace)
    our_beat, their_beat = keys.worker_heartbeat("host-a:1"), keys.worker_heartbeat("host-b:2")
    for beat in (our_beat, their_beat):
        client.set(beat, "{}", px=30_000)  # both processes are alive
    ours = LockManager(client, ttl_seconds=30, owner=lambda: our_beat)
    theirs = LockManager(client, ttl_seconds=30, owner=lambda: their_beat)
    yield ours, theirs, our_beat, their_beat
    ours.close()
    theirs.close()

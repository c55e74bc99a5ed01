"""The mailbox limiter when Redis' answer is lost or Redis is gone: an acquire sent again holds one slot."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import redis

from calsync.core.model.errors import StoreUnavailable
from calsync.core.redis.keys import RedisKeys
from calsync.core.redis.limiter import RedisLimiter
from tests.redis.conftest import drop_connections
from tests.redis.test_limiter import holders, limiter


def test_an_acquire_whose_answer_was_lost_is_sent_again_and_holds_one_slot(
    client: redis.Redis, namespace: str, lose_next_answer: Callable[[], list[Any]]
) -> None:
    slots = limiter(client, namespace, limit=1)
    with slots.slot("warm"):  # opens the connection and loads the script
        pass
    lost = lose_next_answer()
    with slots.slot("k"):  # the first acquire ran and took the slot; the one sent again finds it its own
        assert lost == [1] and holders(client, namespace, "k") == 1
    assert holders(client, namespace, "k") == 0


def test_a_slot_released_after_its_connection_dropped_is_free(
    named: redis.Redis, client: redis.Redis, namespace: str
) -> None:
    slots = limiter(named, namespace, limit=1)
    with slots.slot("k"):
        assert drop_connections(client, named) >= 1  # a restart, an idle timeout
    assert holders(client, namespace, "k") == 0
    with slots.slot("k"):
        pass


def test_redis_unreachable_is_store_unavailable(namespace: str) -> None:
    unreachable = redis.Redis.from_url("redis://127.0.0.1:1/0", socket_connect_timeout=1)
    slots = RedisLimiter(unreachable, RedisKeys(namespace), limit=1, lease=30, wait=0)
    with pytest.raises(StoreUnavailable, match="taking a slot"):
        slots.slot("k").__enter__()

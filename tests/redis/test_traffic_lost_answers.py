"""The traffic scripts when Redis' answer is lost or Redis is gone: an admit sent again holds one slot."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import redis

from calsync.core.model.errors import StoreUnavailable
from calsync.core.redis.keys import RedisKeys
from calsync.core.traffic import Limits, TrafficStore
from calsync.core.traffic.store import Admission
from tests.redis.conftest import drop_connections
from tests.redis.test_traffic_store import admit, store

ONE = Limits(concurrency=1)


def _slots(client: redis.Redis, namespace: str, account: str) -> int:
    return int(client.zcard(RedisKeys(namespace).traffic_slots("graph", account)))


def test_an_admit_whose_answer_was_lost_is_sent_again_and_holds_one_slot(
    client: redis.Redis, namespace: str, lose_next_answer: Callable[[], list[Any]]
) -> None:
    traffic = store(client, namespace)
    admit(traffic, "warm", ONE)  # opens the connection and loads the script
    lost = lose_next_answer()
    call = admit(traffic, "a", ONE)
    assert lost and lost[0][0] == 1, "the lost admit never ran"
    assert call.admitted, "the admit sent again was held by its own first slot"
    assert _slots(client, namespace, "a") == 1
    traffic.settle("graph", "a", call, ONE, "success")
    assert _slots(client, namespace, "a") == 0 and admit(traffic, "a", ONE).admitted


def test_a_call_settled_after_its_connection_dropped_frees_its_slot(
    named: redis.Redis, client: redis.Redis, namespace: str
) -> None:
    traffic = store(named, namespace)
    call = admit(traffic, "a", ONE)
    assert call.admitted and drop_connections(client, named) >= 1  # a restart, an idle timeout
    traffic.settle("graph", "a", call, ONE, "success")
    assert _slots(client, namespace, "a") == 0 and admit(traffic, "a", ONE).admitted


def test_redis_unreachable_is_store_unavailable(namespace: str) -> None:
    unreachable = redis.Redis.from_url("redis://127.0.0.1:1/0", socket_connect_timeout=1)
    traffic = TrafficStore(unreachable, RedisKeys(namespace))
    with pytest.raises(StoreUnavailable, match="admitting"):
        admit(traffic, "a", ONE)
    with pytest.raises(StoreUnavailable, match="settling"):
        traffic.settle("graph", "a", Admission(True, 0, None, "t", 0), ONE, "failure")

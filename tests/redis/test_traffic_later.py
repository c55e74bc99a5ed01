"""The traffic scripts on the threads' own connections: a success settled without waiting, re-sent admits."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import redis

from calsync.core.model.errors import StoreUnavailable
from calsync.core.redis.keys import RedisKeys
from calsync.core.redis.thread_connections import ThreadConnections
from calsync.core.redis.traffic import Admission, Limits, TrafficStore
from tests.redis.test_traffic_store import BREAKER, admit, store
from tests.support import wait_until

ONE = Limits(concurrency=1)


def _slots(client: redis.Redis, namespace: str, account: str) -> int:
    return int(client.zcard(RedisKeys(namespace).traffic_slots("graph", account)))


def _in_thread(call: Any) -> Any:
    result: list[Any] = []
    thread = threading.Thread(target=lambda: result.append(call()))
    thread.start()
    thread.join(timeout=30)
    return result[0]


def test_a_success_settled_later_frees_its_slot_for_this_thread_at_once_and_for_others_soon(
    client: redis.Redis, namespace: str
) -> None:
    traffic = store(client, namespace)
    call = admit(traffic, "a", ONE)
    assert call.admitted
    traffic.settle_later("graph", "a", call, ONE)
    again = admit(traffic, "a", ONE)  # the same connection: the settle ran before this admit
    assert again.admitted
    traffic.settle_later("graph", "a", again, ONE)
    wait_until(lambda: _slots(client, namespace, "a") == 0, what="the slot freed, seen on another connection")
    other = _in_thread(lambda: admit(traffic, "a", ONE))  # another thread's own connection
    assert other.admitted and _slots(client, namespace, "a") == 1
    traffic.close()


def test_a_success_settled_later_closes_the_breaker_count(client: redis.Redis, namespace: str) -> None:
    traffic = store(client, namespace)
    for ending in ["failure", "failure", "success", "failure", "failure"]:  # 3 in a row would open it
        call = admit(traffic, "a", BREAKER)
        assert call.admitted, f"held before {ending}"
        if ending == "success":
            traffic.settle_later("graph", "a", call, BREAKER)
        else:
            traffic.settle("graph", "a", call, BREAKER, "failure")
    assert traffic.circuits("graph").state == "closed"


def test_a_probe_s_success_is_settled_waiting_so_the_breaker_is_closed_for_everyone_at_once(
    client: redis.Redis, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    traffic = store(client, namespace)
    for n in range(BREAKER.breaker_failures):
        call = admit(traffic, f"acc{n}", BREAKER)
        traffic.settle("graph", f"acc{n}", call, BREAKER, "failure")
    probe = wait_until(lambda: (a := admit(traffic, "acc9", BREAKER)).admitted and a, what="the half-open probe")
    assert probe.probes
    sent_later: list[object] = []
    monkeypatch.setattr(ThreadConnections, "send_later", lambda self, *args: sent_later.append(args))
    traffic.settle_later("graph", "acc9", probe, BREAKER)
    assert not sent_later and traffic.circuits("graph").state == "closed"


def test_a_settle_that_could_not_be_sent_is_sent_again_waiting(
    client: redis.Redis, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    traffic = store(client, namespace)
    call = admit(traffic, "a", ONE)
    connection = traffic._lines.connection()

    def broken_once(*args: object, **kwargs: object) -> None:
        monkeypatch.undo()  # the settle sent later: the pipe broke, it never reached Redis
        raise redis.ConnectionError("broken pipe")

    monkeypatch.setattr(connection, "send_packed_command", broken_once)
    traffic.settle_later("graph", "a", call, ONE)
    assert _slots(client, namespace, "a") == 0  # settled at once, on a new connection
    traffic.close()


def _lose_next_answer(traffic: TrafficStore, monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The next script reaches Redis and runs; its answer is lost with the connection."""
    connection = traffic._lines.connection()
    lost: list[object] = []

    def reply_lost(*args: object, **kwargs: object) -> object:
        answer = type(connection).read_response(connection, *args, **kwargs)
        if not lost:
            lost.append(answer)
            raise redis.ConnectionError("connection reset before the reply")
        return answer

    monkeypatch.setattr(connection, "read_response", reply_lost)
    return lost


def test_an_admit_whose_answer_was_lost_is_sent_again_and_holds_one_slot(
    client: redis.Redis, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    traffic = store(client, namespace)
    admit(traffic, "warm", ONE)  # opens this thread's connection
    lost = _lose_next_answer(traffic, monkeypatch)
    call = admit(traffic, "a", ONE)
    assert lost and lost[0][0] == 1, "the lost admit never ran"  # type: ignore[index]
    assert call.admitted, "the re-sent admit was held by its own first slot"
    assert _slots(client, namespace, "a") == 1
    traffic.settle("graph", "a", call, ONE, "success")
    assert _slots(client, namespace, "a") == 0 and admit(traffic, "a", ONE).admitted
    traffic.close()


def test_redis_unreachable_is_store_unavailable(redis_url: str, namespace: str) -> None:
    unreachable = redis.Redis.from_url("redis://127.0.0.1:1/0", socket_connect_timeout=1, retry=None)
    traffic = TrafficStore(unreachable, RedisKeys(namespace))
    with pytest.raises(StoreUnavailable, match="admitting"):
        admit(traffic, "a", ONE)
    with pytest.raises(StoreUnavailable, match="settling"):
        traffic.settle("graph", "a", Admission(True, 0, None, "t", 0), ONE, "failure")
    with pytest.raises(StoreUnavailable, match="settling"):
        traffic.settle_later("graph", "a", Admission(True, 0, None, "t", 0), ONE)

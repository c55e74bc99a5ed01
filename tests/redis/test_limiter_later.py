"""The mailbox limiter on the threads' own connections: a release sent without waiting, acquires sent again."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import redis

from calsync.core.model.errors import ConcurrencyLimited, StoreUnavailable
from calsync.core.redis.keys import RedisKeys
from calsync.core.redis.limiter import RedisLimiter
from calsync.core.redis.thread_connections import ThreadConnections
from tests.redis.test_limiter import limiter
from tests.support import wait_until


def _unread(slots: RedisLimiter) -> int:
    return len(slots._lines._line().unread)


def _free(slots: RedisLimiter, key: str) -> bool:
    try:
        with slots.slot(key):
            return True
    except ConcurrencyLimited:
        return False


def _kill(client: redis.Redis, slots: RedisLimiter) -> None:
    client.client_kill("{}:{}".format(*slots._lines.connection()._sock.getsockname()))  # a restart, an idle timeout


def test_a_release_not_awaited_frees_the_slot_for_this_thread_at_once_and_for_others_soon(
    client: redis.Redis, namespace: str
) -> None:
    slots = limiter(client, namespace, limit=1)
    with slots.slot("k"):
        pass
    assert _unread(slots) == 1  # the release was sent, its answer not waited for
    with slots.slot("k"):  # the same connection: the release ran before this acquire (wait=0: no poll)
        assert _unread(slots) == 0
    wait_until(lambda: slots.holders("k") == 0, what="the slot freed, seen on another connection")
    other: list[bool] = []
    thread = threading.Thread(target=lambda: other.append(_free(slots, "k")))  # another thread's connection
    thread.start()
    thread.join(timeout=30)
    assert other == [True]
    slots.close()


def test_a_release_that_could_not_be_sent_is_sent_again_waiting(
    client: redis.Redis, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    slots = limiter(client, namespace, limit=1)
    with slots.slot("k"):
        connection = slots._lines.connection()

        def broken_once(*args: object, **kwargs: object) -> None:
            monkeypatch.undo()  # the release: the pipe broke, it never reached Redis
            raise redis.ConnectionError("broken pipe")

        monkeypatch.setattr(connection, "send_packed_command", broken_once)
    assert slots.holders("k") == 0 and _unread(slots) == 0  # freed at once, on a new connection
    slots.close()


def test_a_release_whose_connection_dropped_frees_the_slot_or_lets_it_expire(
    client: redis.Redis, namespace: str
) -> None:
    slots = limiter(client, namespace, limit=1, lease=1)
    with slots.slot("k"):
        pass
    _kill(client, slots)  # its answer is lost: whether it ran is not known to the limiter
    wait_until(lambda: _free(slots, "k"), timeout=10, what="the slot free for the next acquire, on a new connection")
    assert slots.holders("k") == 0
    slots.close()


def test_an_acquire_whose_answer_was_lost_is_sent_again_and_holds_one_slot(
    client: redis.Redis, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    slots = limiter(client, namespace, limit=1)
    with slots.slot("warm"):  # opens this thread's connection
        pass
    slots._lines.call("PING")  # reads the warm release's answer
    connection = slots._lines.connection()
    lost: list[object] = []

    def reply_lost(*args: object, **kwargs: object) -> object:
        answer = type(connection).read_response(connection, *args, **kwargs)
        if not lost and answer == 1:
            lost.append(answer)
            raise redis.ConnectionError("connection reset before the reply")
        return answer

    monkeypatch.setattr(connection, "read_response", reply_lost)
    with slots.slot("k"):  # the first acquire ran and took the slot; the one sent again finds it its own
        assert lost == [1] and slots.holders("k") == 1
    wait_until(lambda: slots.holders("k") == 0, what="the one slot freed")
    slots.close()


def test_the_slot_commands_go_on_the_given_connections(client: redis.Redis, namespace: str,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    lines = ThreadConnections(client)
    slots = RedisLimiter(client, RedisKeys(namespace), limit=1, lease=30, wait=0, connections=lines)
    sent: list[tuple[str, Any]] = []
    real_call, real_later = ThreadConnections.call, ThreadConnections.send_later

    def call(self: ThreadConnections, *args: Any) -> Any:
        sent.append(("waited" if self is lines else "other", args[0]))
        return real_call(self, *args)

    def send_later(self: ThreadConnections, args: Any, on_answer: Any) -> None:
        sent.append(("later" if self is lines else "other", args[0]))
        real_later(self, args, on_answer)

    monkeypatch.setattr(ThreadConnections, "call", call)
    monkeypatch.setattr(ThreadConnections, "send_later", send_later)
    with slots.slot("k"):
        pass
    assert sent == [("waited", "EVALSHA"), ("later", "ZREM")]
    slots.close()  # not its own: the lines stay open for their owner
    assert lines.call("PING") == b"PONG"
    lines.close()


def test_redis_unreachable_is_store_unavailable(namespace: str) -> None:
    unreachable = redis.Redis.from_url("redis://127.0.0.1:1/0", socket_connect_timeout=1, retry=None)
    slots = RedisLimiter(unreachable, RedisKeys(namespace), limit=1, lease=30, wait=0)
    with pytest.raises(StoreUnavailable, match="taking a slot"):
        slots.slot("k").__enter__()

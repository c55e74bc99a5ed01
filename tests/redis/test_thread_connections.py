"""Per-thread connections: answers read later, in order, never taken for another command's, whatever drops."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis

from calsync.core.redis.thread_connections import ThreadConnections


class Interrupted(BaseException):
    """What Dramatiq's time limit raises in a worker thread, at any point."""


@pytest.fixture
def timed_client(redis_url: str) -> Iterator[redis.Redis]:
    """A client whose reads give up after 5 s: a missing answer fails the test instead of hanging it."""
    client = redis.Redis.from_url(redis_url, socket_timeout=5)
    yield client
    client.close()


@pytest.fixture
def lines(timed_client: redis.Redis) -> Iterator[ThreadConnections]:
    """This test's per-thread connections."""
    connections = ThreadConnections(timed_client)
    yield connections
    connections.close()


def _answers() -> tuple[list[Any], Any]:
    got: list[Any] = []
    return got, got.append


def test_answers_sent_later_are_read_in_order_before_the_next_command_s_own(
    lines: ThreadConnections, namespace: str
) -> None:
    got, record = _answers()
    for n in range(5):
        lines.send_later(("ECHO", f"later-{n}"), record)
    lines.send_later(("HSET", f"{namespace}:h", "a", "1"), record)
    lines.send_later(("INCR", f"{namespace}:h"), record)  # WRONGTYPE: an error answer, complete
    lines.send_later(("ECHO", "after-the-error"), record)
    assert got == []  # nothing read yet
    assert lines.call("ECHO", "mine") == b"mine"
    assert got[:6] == [b"later-0", b"later-1", b"later-2", b"later-3", b"later-4", 1]
    assert isinstance(got[6], redis.ResponseError) and got[7] == b"after-the-error"
    assert lines.call("ECHO", "next") == b"next"


def test_a_command_sent_later_runs_before_this_thread_s_next_one(lines: ThreadConnections, namespace: str) -> None:
    _, record = _answers()
    for _ in range(3):
        lines.send_later(("INCR", f"{namespace}:n"), record)
    assert lines.call("GET", f"{namespace}:n") == b"3"


def test_an_answer_lost_with_its_connection_is_handed_the_error_and_the_next_reply_is_the_command_s_own(
    lines: ThreadConnections, monkeypatch: pytest.MonkeyPatch
) -> None:
    got, record = _answers()
    lines.send_later(("ECHO", "stale"), record)
    connection = lines.connection()
    lost = [False]

    def drops(*args: object, **kwargs: object) -> object:
        if not lost[0]:  # the connection breaks with the answer still in its socket, unread
            lost[0] = True
            raise redis.ConnectionError("connection reset")
        return type(connection).read_response(connection, *args, **kwargs)

    monkeypatch.setattr(connection, "read_response", drops)
    assert lines.call("ECHO", "mine") == b"mine"  # on a new socket: the stale answer went with the old one
    assert len(got) == 1 and isinstance(got[0], redis.ConnectionError)


def test_a_connection_reopened_before_its_answers_were_read_hands_them_the_error(lines: ThreadConnections) -> None:
    got, record = _answers()
    lines.send_later(("ECHO", "gone"), record)
    lines.connection().disconnect()  # as redis-py does itself after a failed health check
    lines.send_later(("ECHO", "sent-on-the-new-socket"), record)
    assert lines.call("ECHO", "mine") == b"mine"
    assert isinstance(got[0], redis.ConnectionError) and got[1:] == [b"sent-on-the-new-socket"]


def test_no_health_check_ping_reads_an_unread_answer(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url, health_check_interval=30, socket_timeout=5)
    lines = ThreadConnections(client)
    try:
        got, record = _answers()
        lines.send_later(("ECHO", "first"), record)
        lines.connection().next_health_check = 0  # as if idle past the interval: the next send would PING
        lines.send_later(("ECHO", "second"), record)
        assert lines.call("ECHO", "mine") == b"mine"
        assert got == [b"first", b"second"]  # a PING would have read "first" and dropped the connection
    finally:
        lines.close()
        client.close()


def test_an_interrupt_between_send_and_read_drops_the_connection(
    lines: ThreadConnections, monkeypatch: pytest.MonkeyPatch
) -> None:
    connection = lines.connection()

    def interrupted(*args: object, **kwargs: object) -> object:
        raise Interrupted  # the job's time limit, after its command was sent

    monkeypatch.setattr(connection, "read_response", interrupted)
    with pytest.raises(Interrupted):
        lines.call("ECHO", "abandoned")
    monkeypatch.undo()
    assert lines.call("ECHO", "mine") == b"mine"  # not the abandoned command's answer


def test_an_interrupt_while_reading_earlier_answers_drops_the_connection(lines: ThreadConnections) -> None:
    got, record = _answers()

    def interrupted(answer: Any) -> None:
        raise Interrupted  # the job's time limit, while the first answer was being handled

    lines.send_later(("ECHO", "first"), interrupted)
    lines.send_later(("ECHO", "second"), record)
    with pytest.raises(Interrupted):
        lines.call("ECHO", "abandoned")
    assert len(got) == 1 and isinstance(got[0], Interrupted)
    assert lines.call("ECHO", "mine") == b"mine"  # not "second", still due on the old socket


def test_a_failed_send_drops_the_connection_and_hands_earlier_answers_the_error(
    lines: ThreadConnections, monkeypatch: pytest.MonkeyPatch, timed_client: redis.Redis, namespace: str
) -> None:
    got, record = _answers()
    lines.send_later(("ECHO", "earlier"), record)
    connection = lines.connection()

    def broken(*args: object, **kwargs: object) -> None:
        raise redis.ConnectionError("broken pipe")

    monkeypatch.setattr(connection, "send_packed_command", broken)
    with pytest.raises(redis.ConnectionError):
        lines.send_later(("SET", f"{namespace}:k", "v"), record)
    monkeypatch.undo()
    assert len(got) == 1 and isinstance(got[0], redis.ConnectionError)
    assert lines.call("ECHO", "mine") == b"mine" and timed_client.exists(f"{namespace}:k") == 0


def test_closing_with_unread_answers_hands_them_the_error_and_leaves_none_in_the_pool(
    timed_client: redis.Redis, namespace: str
) -> None:
    lines = ThreadConnections(timed_client)
    got, record = _answers()
    lines.send_later(("ECHO", "unread"), record)
    lines.close()
    assert len(got) == 1 and isinstance(got[0], redis.ConnectionError)
    for n in range(3):  # pooled connections answer their own commands, not the unread one
        assert timed_client.echo(f"probe{n}") == f"probe{n}".encode()

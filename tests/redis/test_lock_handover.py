"""A lock's handover on a real Redis: what its last holder left, ``unknown`` while one holds it or it did not say."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import redis

from calsync.core.redis.keys import RedisKeys
from calsync.core.redis.locks import HANDOVER_TTL, UNKNOWN, LockManager, OwnedLock
from tests.redis.conftest import Owners


def _keys(namespace: str, name: str) -> tuple[str, str]:
    keys = RedisKeys(namespace)
    return keys.lock("t", name, "a"), keys.handover("t", name, "a")


def _taken(owners: Owners, namespace: str, name: str) -> tuple[OwnedLock, str, str]:
    """Both processes alive; the first holds the lock of target ``name``, with its handover."""
    lock, handover = _keys(namespace, name)
    held = owners[0].acquire(lock, handover=handover)
    assert held is not None
    return held, lock, handover


def test_the_next_holder_learns_what_the_last_one_left(owners: Owners, namespace: str, client: redis.Redis) -> None:
    ours, theirs, *_ = owners
    first, lock, handover = _taken(owners, namespace, "e-left")
    assert first.handed_over == ""  # none kept yet
    assert client.get(handover) == UNKNOWN.encode() and 0 < int(client.ttl(handover)) <= HANDOVER_TTL
    assert ours.release(first, leaves="3:1")
    assert client.get(handover) == b"3:1"
    second = theirs.acquire(lock, handover=handover)
    assert second is not None and second.handed_over == "3:1" and client.get(handover) == UNKNOWN.encode()
    assert theirs.release(second)  # says nothing: the handover stays unknown, the next holder reads again
    third = ours.acquire(lock, handover=handover)
    assert third is not None and third.handed_over == UNKNOWN and ours.release(third)


def test_a_holder_that_lost_its_lock_hands_over_nothing(owners: Owners, namespace: str, client: redis.Redis) -> None:
    ours, theirs, *_ = owners
    held, lock, handover = _taken(owners, namespace, "e-lost")
    client.delete(lock)  # expired while its holder was paused
    taken = theirs.acquire(lock, handover=handover)
    assert taken is not None and taken.handed_over == UNKNOWN
    assert not ours.release(held, leaves="9:1")  # not ours any more: neither the lock nor its handover is touched
    assert client.get(handover) == UNKNOWN.encode() and client.get(lock) == taken.token.encode()
    assert theirs.release(taken, leaves="2:1") and client.get(handover) == b"2:1"


def test_a_plain_lock_given_a_handover_says_unknown_and_never_takes_over(
    owners: Owners, namespace: str, client: redis.Redis
) -> None:
    """An operator's cancel (no heartbeat in its process) writes outside a job: the next job must read again."""
    ours, _, our_beat, _ = owners
    plain = LockManager(client, ttl_seconds=30)  # no heartbeat in this process: a plain lock
    try:
        lock, handover = _keys(namespace, "e-plain")
        client.set(handover, "1:0")
        held = plain.acquire(lock, handover=handover)
        assert held is not None and held.handed_over == "1:0" and client.get(handover) == UNKNOWN.encode()
        assert plain.release(held) and client.get(handover) == UNKNOWN.encode()  # said nothing: stays unknown
        dead = ours.acquire(lock, handover=handover)
        client.delete(our_beat)  # its holder is gone
        assert dead is not None and plain.acquire(lock, handover=handover) is None  # waits for the TTL
    finally:
        plain.close()


def test_an_acquire_sent_twice_does_not_say_what_was_left(
    owners: Owners,
    namespace: str,
    client: redis.Redis,
    lose_next_answer: Callable[[], list[Any]],
) -> None:
    ours, theirs, *_ = owners
    lock, handover = _keys(namespace, "e-twice")
    client.set(handover, "4:0")
    warm = ours.acquire(f"{lock}:warm")  # opens the connection and loads the script
    assert warm is not None
    lost = lose_next_answer()  # the first acquire ran (the handover said 4:0); its answer is lost
    held = ours.acquire(lock, handover=handover)
    assert lost and lost[0][2] == b"4:0", "the lost answer was never simulated"
    assert held is not None and held.handed_over == UNKNOWN and client.get(handover) == UNKNOWN.encode()
    assert theirs.acquire(lock, handover=handover) is None
    assert ours.release(held) and ours.release(warm)

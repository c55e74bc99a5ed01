"""A held lock outlives its TTL for as long as its owner holds it: the renewer keeps extending it."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import Any

import redis

from calsync.core.redis.locks import LockManager
from tests.support import wait_until

TTL = 0.3  # seconds: renewed every 0.1 s


def test_a_held_lock_is_renewed_past_its_ttl_and_nobody_else_takes_it(client: redis.Redis, namespace: str) -> None:
    ours, theirs = LockManager(client, ttl_seconds=TTL), LockManager(client, ttl_seconds=TTL)
    try:
        key = f"{namespace}:lock:t:e:renewed"
        held = ours.acquire(key)
        assert held is not None
        started = time.monotonic()
        readings: list[int] = [int(client.pttl(key))]
        stolen: list[object] = []

        def held_three_ttls_with_refreshes() -> bool:
            other = theirs.acquire(key)
            if other is not None:
                stolen.append(other)
                return True  # fail below with a clear message instead of timing out
            readings.append(int(client.pttl(key)))
            refreshes = sum(1 for a, b in itertools.pairwise(readings) if b > a)
            return refreshes >= 6 and time.monotonic() - started > 3 * TTL

        wait_until(held_three_ttls_with_refreshes, timeout=10, what="the lock to be renewed for three TTLs")
        assert not stolen, f"another owner took the lock after {time.monotonic() - started:.2f}s (TTL {TTL}s)"
        assert all(reading > 0 for reading in readings), f"the key expired or lost its TTL: {readings}"
        assert not held.lost
        assert client.get(key) == held.token.encode()
        assert ours.release(held) and client.exists(key) == 0
    finally:
        ours.close()
        theirs.close()


def test_releasing_a_lock_taken_over_by_another_owner_marks_it_lost(
    client: redis.Redis, managers: tuple[LockManager, LockManager], namespace: str
) -> None:
    ours, theirs = managers
    key = f"{namespace}:lock:t:e:taken-over"
    stale = ours.acquire(key)
    assert stale is not None
    client.delete(key)  # our TTL ran out while we were paused, and another worker took the target
    current = theirs.acquire(key)
    assert current is not None
    assert not ours.release(stale) and stale.lost
    assert client.get(key) == current.token.encode() and not current.lost
    assert theirs.release(current) and not current.lost


def test_a_take_whose_reply_was_lost_is_recognised_as_ours(
    client: redis.Redis,
    managers: tuple[LockManager, LockManager],
    namespace: str,
    lose_next_answer: Callable[[], list[Any]],
) -> None:
    ours, theirs = managers
    key = f"{namespace}:lock:t:e:reply-lost"
    warm = ours.acquire(f"{key}:warm")  # opens the connection and loads the script
    assert warm is not None
    lost = lose_next_answer()  # the take reaches Redis and runs; its reply is lost with the connection
    held = ours.acquire(key)
    assert lost and isinstance(lost[0], list), "the lost reply was never simulated"
    assert held is not None, "our own take, whose reply was lost, was taken for someone else's lock"
    assert client.get(key) == held.token.encode() and theirs.acquire(key) is None
    assert ours.release(held) and ours.release(warm)

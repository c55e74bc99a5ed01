"""Taking over the lock of a dead owner on a real Redis: only once its heartbeat key is gone, never while it lives."""

from __future__ import annotations

import redis

from calsync.core.redis.locks import LockManager
from tests.redis.conftest import Owners


def test_a_lock_is_never_taken_over_while_its_owner_beats(owners: Owners, namespace: str, client: redis.Redis) -> None:
    ours, theirs, our_beat, _ = owners
    key = f"{namespace}:lock:t:e:a"
    held = ours.acquire(key)
    assert held is not None and held.token.startswith(f"{our_beat}|") and not held.taken_over
    for _ in range(3):
        assert theirs.acquire(key) is None
    assert client.get(key) == held.token.encode() and ours.release(held)


def test_the_lock_of_an_owner_whose_heartbeat_is_gone_is_taken_over_once(
    owners: Owners, namespace: str, client: redis.Redis
) -> None:
    ours, theirs, our_beat, their_beat = owners
    key = f"{namespace}:lock:t:e:a"
    dead = ours.acquire(key)
    assert dead is not None
    client.delete(our_beat)  # our process died: its heartbeat key expired
    taken = theirs.acquire(key)
    assert taken is not None and taken.taken_over and taken.token.startswith(f"{their_beat}|")
    assert 0 < client.pttl(key) <= 30_000
    assert ours.acquire(key) is None  # the new owner lives: no one takes it back
    assert not ours.release(dead) and client.get(key) == taken.token.encode()  # the old token frees nothing
    assert theirs.release(taken)


def test_an_owner_is_recorded_only_while_its_heartbeat_key_exists(
    owners: Owners, namespace: str, client: redis.Redis
) -> None:
    ours, theirs, our_beat, _ = owners
    client.delete(our_beat)  # heartbeats configured, but this process has not beaten (yet, or any more)
    key = f"{namespace}:lock:t:e:a"
    held = ours.acquire(key)
    assert held is not None and held.token.startswith("|")
    assert theirs.acquire(key) is None  # an unowned lock only expires by its TTL
    assert ours.release(held)


def test_a_process_without_heartbeats_neither_takes_over_nor_can_lose_its_locks(
    owners: Owners, namespace: str, client: redis.Redis
) -> None:
    ours, _, our_beat, _ = owners
    plain = LockManager(client, ttl_seconds=30)
    key, other = f"{namespace}:lock:t:e:a", f"{namespace}:lock:t:e:b"
    dead = ours.acquire(key)
    client.delete(our_beat)
    assert dead is not None and plain.acquire(key) is None  # a plain lock manager only waits for the TTL
    held = plain.acquire(other)
    assert held is not None and held.token.startswith("|")
    client.set(our_beat, "{}", px=30_000)
    assert ours.acquire(other) is None and plain.release(held)
    plain.close()

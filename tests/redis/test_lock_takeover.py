"""Taking over the lock of a dead owner on a real Redis: only once its heartbeat key is gone, never while it lives."""

from __future__ import annotations

import redis

from calsync.core.redis.keys import RedisKeys
from calsync.core.redis.locks import LockManager


def _owned(managers: tuple[LockManager, LockManager], namespace: str, client: redis.Redis) -> tuple[str, str]:
    keys = RedisKeys(namespace)
    beats = keys.worker_heartbeat("host-a:1"), keys.worker_heartbeat("host-b:2")
    for manager, beat in zip(managers, beats, strict=True):
        client.set(beat, "{}", px=30_000)  # both processes are alive
        manager.owned_by(lambda beat=beat: beat)
    return beats


def test_a_lock_is_never_taken_over_while_its_owner_beats(
    managers: tuple[LockManager, LockManager], namespace: str, client: redis.Redis
) -> None:
    ours, theirs = managers
    our_beat, _ = _owned(managers, namespace, client)
    key = f"{namespace}:lock:t:e:a"
    held = ours.acquire(key)
    assert held is not None and held.token.startswith(f"{our_beat}|") and not held.taken_over
    for _ in range(3):
        assert theirs.acquire(key) is None
    assert client.get(key) == held.token.encode() and ours.release(held)


def test_the_lock_of_an_owner_whose_heartbeat_is_gone_is_taken_over_once(
    managers: tuple[LockManager, LockManager], namespace: str, client: redis.Redis
) -> None:
    ours, theirs = managers
    our_beat, their_beat = _owned(managers, namespace, client)
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
    managers: tuple[LockManager, LockManager], namespace: str, client: redis.Redis
) -> None:
    ours, theirs = managers
    our_beat, _ = _owned(managers, namespace, client)
    client.delete(our_beat)  # heartbeats configured, but this process has not beaten (yet, or any more)
    key = f"{namespace}:lock:t:e:a"
    held = ours.acquire(key)
    assert held is not None and held.token.startswith("|")
    assert theirs.acquire(key) is None  # an unowned lock only expires by its TTL
    assert ours.release(held)


def test_a_process_without_heartbeats_neither_takes_over_nor_can_lose_its_locks(
    managers: tuple[LockManager, LockManager], namespace: str, client: redis.Redis
) -> None:
    ours, _ = managers
    our_beat, _ = _owned(managers, namespace, client)
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

"""Per-target locks on a real Redis: one owner at a time, released and renewed only by their owner."""

from __future__ import annotations

import redis

from calsync.core.redis.locks import LockManager


def test_one_owner_at_a_time(managers: tuple[LockManager, LockManager], namespace: str) -> None:
    ours, theirs = managers
    key = f"{namespace}:lock:t:e:a"
    held = ours.acquire(key)
    assert held is not None
    assert theirs.acquire(key) is None and ours.acquire(key) is None  # not re-entrant either
    assert ours.release(held)
    again = theirs.acquire(key)
    assert again is not None and theirs.release(again)


def test_tokens_differ_across_processes_and_acquisitions(
    managers: tuple[LockManager, LockManager], namespace: str, client: redis.Redis
) -> None:
    tokens = set()
    for n, manager in enumerate(managers * 3):
        held = manager.acquire(f"{namespace}:lock:t:e{n}:a")
        assert held is not None and client.get(held.key) == held.token.encode()
        tokens.add(held.token)
        manager.release(held)
    assert len(tokens) == 6


def test_an_expired_lock_taken_over_is_neither_released_nor_renewed_by_its_old_owner(
    managers: tuple[LockManager, LockManager], namespace: str, client: redis.Redis
) -> None:
    ours, theirs = managers
    key = f"{namespace}:lock:t:e:a"
    stale = ours.acquire(key)
    assert stale is not None
    client.delete(key)  # our TTL ran out while we were paused...
    current = theirs.acquire(key)  # ...and another worker took the target
    assert current is not None
    ours.renew_all()
    assert stale.lost
    assert not ours.release(stale)
    assert client.get(key) == current.token.encode()
    assert theirs.release(current)


def test_a_lock_expires_by_itself_and_release_survives_a_script_flush(
    managers: tuple[LockManager, LockManager], client: redis.Redis, namespace: str
) -> None:
    ours, _ = managers
    key = f"{namespace}:lock:t:e:flush"
    held = ours.acquire(key)
    assert held is not None
    assert 0 < int(client.pttl(key)) <= 30_000  # a dead owner blocks the target for one TTL at most
    client.script_flush()  # as after a Redis restart: the release script is no longer cached
    assert ours.release(held) and client.exists(key) == 0
    again = ours.acquire(key)
    assert again is not None and ours.release(again)  # and the cached script serves the next release


def test_a_dropped_connection_is_replaced_without_losing_the_lock_state(
    managers: tuple[LockManager, LockManager], client: redis.Redis, namespace: str
) -> None:
    ours, theirs = managers
    key = f"{namespace}:lock:t:e:dropped"
    warm = ours.acquire(f"{key}:warm")  # opens this thread's lock connection
    assert warm is not None
    connection = ours._local.connection
    client.client_kill("{}:{}".format(*connection._sock.getsockname()))  # as a restart or an idle timeout would
    held = ours.acquire(key)
    assert held is not None and theirs.acquire(key) is None  # taken exactly once, on a new connection
    client.client_kill("{}:{}".format(*connection._sock.getsockname()))
    assert ours.release(held) and client.exists(key) == 0
    assert ours.release(warm)

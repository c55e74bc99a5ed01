"""Per-target locks on a real Redis: one owner at a time, released and renewed only by their owner."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from calsync.core.redis.locks import LockManager, OwnedLock
from tests.redis.conftest import drop_connections


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


def _lost_to_them(
    managers: tuple[LockManager, LockManager], client: redis.Redis, key: str
) -> tuple[OwnedLock, OwnedLock]:
    """Our lock on ``key`` and theirs: our TTL ran out while we were paused, and another worker took the target."""
    ours, theirs = managers
    stale = ours.acquire(key)
    assert stale is not None
    client.delete(key)
    current = theirs.acquire(key)
    assert current is not None
    return stale, current


def test_an_expired_lock_taken_over_is_neither_released_nor_renewed_by_its_old_owner(
    managers: tuple[LockManager, LockManager], namespace: str, client: redis.Redis
) -> None:
    ours, theirs = managers
    key = f"{namespace}:lock:t:e:a"
    stale, current = _lost_to_them(managers, client, key)
    ours.renew_all()
    assert stale.lost
    assert not ours.release(stale)
    assert client.get(key) == current.token.encode()
    assert theirs.release(current)


def test_a_lock_its_job_releases_while_the_renewal_is_on_its_way_is_not_lost(
    managers: tuple[LockManager, LockManager],
    namespace: str,
    client: redis.Redis,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    ours, _ = managers
    held = ours.acquire(f"{namespace}:lock:t:e:race")
    assert held is not None
    pipeline = client.pipeline

    def released_meanwhile(*args: Any, **kwargs: Any) -> Any:
        pipe = pipeline(*args, **kwargs)
        execute = pipe.execute

        def release_then_execute(*a: Any, **k: Any) -> Any:
            assert ours.release(held)  # the job ends between the renewer's snapshot and its EXTENDs
            return execute(*a, **k)

        pipe.execute = release_then_execute
        return pipe

    monkeypatch.setattr(client, "pipeline", released_meanwhile)
    ours.renew_all()
    assert not held.lost and "lock lost" not in caplog.text


def test_a_lock_expires_by_itself_and_release_survives_a_script_flush(
    private_client: redis.Redis, namespace: str
) -> None:
    client = private_client  # the flush must not reach other processes' tests on the shared server
    ours = LockManager(client, ttl_seconds=30)
    key = f"{namespace}:lock:t:e:flush"
    try:
        held = ours.acquire(key)
        assert held is not None
        assert 0 < int(client.pttl(key)) <= 30_000  # a dead owner blocks the target for one TTL at most
        client.script_flush()  # as after a Redis restart: the release script is no longer cached
        assert ours.release(held) and client.exists(key) == 0
        again = ours.acquire(key)
        assert again is not None and ours.release(again)  # and the cached script serves the next release
    finally:
        ours.close()


def test_a_dropped_connection_is_replaced_without_losing_the_lock_state(
    named: redis.Redis, client: redis.Redis, namespace: str
) -> None:
    ours, theirs = LockManager(named, ttl_seconds=30), LockManager(client, ttl_seconds=30)
    key = f"{namespace}:lock:t:e:dropped"
    warm = ours.acquire(f"{key}:warm")  # opens a connection of ours
    assert warm is not None and drop_connections(client, named) >= 1
    held = ours.acquire(key)
    assert held is not None and theirs.acquire(key) is None  # taken exactly once, on a new connection
    assert drop_connections(client, named) >= 1
    assert ours.release(held) and client.exists(key) == 0
    assert ours.release(warm)
    ours.close()
    theirs.close()

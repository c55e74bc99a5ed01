"""The per-key Redis semaphore: at most N holders across processes, leases outlive a killed holder only briefly."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import threading

import pytest
import redis

from calsync.core.model.errors import ConcurrencyLimited
from calsync.core.redis.keys import RedisKeys
from calsync.core.redis.limiter import RedisLimiter
from tests.support import wait_until


def limiter(client: redis.Redis, namespace: str, *, limit: int = 4, lease: float = 30, wait: float = 0) -> RedisLimiter:
    """A limiter of this test's namespace."""
    return RedisLimiter(client, RedisKeys(namespace), limit=limit, lease=lease, wait=wait)


def holders(client: redis.Redis, namespace: str, key: str) -> int:
    """How many unexpired leases ``key`` has right now."""
    now_ms = int(client.time()[0]) * 1000
    return int(client.zcount(RedisKeys(namespace).slots(key), now_ms, "+inf"))


def test_at_most_limit_holders_per_key_and_keys_are_independent(client: redis.Redis, namespace: str) -> None:
    one, other = limiter(client, namespace), limiter(client, namespace)  # two processes' limiters
    with contextlib.ExitStack() as held:
        for n in range(4):
            held.enter_context((one if n % 2 else other).slot("graph:app:alpha@example.com"))
        assert holders(client, namespace, "graph:app:alpha@example.com") == 4
        with pytest.raises(ConcurrencyLimited):
            one.slot("graph:app:alpha@example.com").__enter__()
        with one.slot("graph:app:beta@example.com"):
            assert holders(client, namespace, "graph:app:beta@example.com") == 1
    assert holders(client, namespace, "graph:app:alpha@example.com") == 0
    with one.slot("graph:app:alpha@example.com"):
        pass


def test_a_waiter_gets_the_slot_a_holder_releases(client: redis.Redis, namespace: str) -> None:
    first, waiter = limiter(client, namespace, limit=1), limiter(client, namespace, limit=1, wait=30)
    slot = first.slot("k")
    slot.__enter__()

    got = threading.Event()

    def wait_for_it() -> None:
        with waiter.slot("k"):
            got.set()

    thread = threading.Thread(target=wait_for_it)
    thread.start()
    wait_until(lambda: holders(client, namespace, "k") == 1, what="the slot held")
    assert not got.is_set()
    slot.__exit__(None, None, None)
    thread.join(timeout=30)
    assert got.is_set()


def test_a_killed_holder_blocks_its_slot_only_until_the_lease_expires(
    client: redis.Redis, namespace: str, redis_url: str
) -> None:
    script = textwrap.dedent(f"""
        import time, redis
        from calsync.core.redis.keys import RedisKeys
        from calsync.core.redis.limiter import RedisLimiter
        limiter = RedisLimiter(redis.Redis.from_url({redis_url!r}), RedisKeys({namespace!r}), limit=1, lease=1, wait=0)
        held = limiter.slot("k")
        held.__enter__()
        print("held", flush=True)
        time.sleep(600)
    """)
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": os.getcwd()})  # fmt: skip
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "held"
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
        survivor = limiter(client, namespace, limit=1, wait=0)
        with pytest.raises(ConcurrencyLimited):  # the dead worker's lease still counts ...
            survivor.slot("k").__enter__()

        def slot_free() -> bool:
            try:
                with survivor.slot("k"):
                    return True
            except ConcurrencyLimited:
                return False

        wait_until(slot_free, timeout=10, what="the dead holder's lease to expire")  # ... only until it expires
    finally:
        if child.poll() is None:
            child.kill()

"""8 worker threads x 3 mailboxes through one adapter: no cross-talk, never more than 4 in flight per mailbox."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import redis

from calsync.core.model.errors import ConcurrencyLimited
from calsync.core.model.markers import SYNC_KEY_PROPERTY_NAME
from calsync.core.redis.keys import RedisKeys
from calsync.core.redis.limiter import RedisLimiter
from calsync_emulators.control import GraphControl
from tests.providers.graph.conftest import MakeAccount, MakeEvent, MakeProvider, target_for

MAILBOXES = ("alpha@example.com", "beta@example.com", "gamma@example.com")


def test_eight_threads_three_mailboxes_at_most_four_in_flight_per_mailbox(
    make_provider: MakeProvider, graph: GraphControl, make_account: MakeAccount, make_event: MakeEvent,
    redis_url: str, namespace: str,
) -> None:  # fmt: skip
    client = redis.Redis.from_url(redis_url)
    # Two "processes" sharing the Redis limiter, four threads each: the limit holds across them.
    limiters = [RedisLimiter(client, RedisKeys(namespace), limit=4, lease=30, wait=30) for _ in range(2)]
    providers = [make_provider(limiter=limiter) for limiter in limiters]
    graph.configure(latency_ms=40)  # every Graph request stays in flight a while, so threads overlap
    accounts = [make_account(address) for address in MAILBOXES]
    # Skewed: two thirds of the jobs hit alpha, so more than 4 threads want it at once.
    which = [0, 0, 0, 0, 1, 2]
    jobs = [(n, accounts[which[n % 6]]) for n in range(48)]

    def sync(job: tuple[int, object]) -> str:
        n, account = job
        event = make_event(id=f"evt-{n}", title=f"Event {n}")
        provider = providers[n % 2]
        for _ in range(50):
            try:
                return provider.upsert(account, event, target_for(account, event)).external_id  # type: ignore[arg-type]
            except ConcurrencyLimited:
                continue
        raise AssertionError("no slot")

    try:
        with ThreadPoolExecutor(max_workers=8) as pool:
            ids = list(pool.map(sync, jobs))
    finally:
        client.close()
    seen = graph.concurrency()
    assert seen["throttled"] == {}
    assert set(seen["peak"]) == set(MAILBOXES) and max(seen["peak"].values()) <= 4
    assert max(seen["peak"].values()) > 1  # the threads really overlapped
    for index, address in enumerate(MAILBOXES):
        items = graph.items(address)
        mine = [n for n, account in jobs if account is accounts[index]]
        assert {i["extended_properties"][SYNC_KEY_PROPERTY_NAME] for i in items} == {
            f"t1:evt-{n}:{accounts[index].id}" for n in mine}  # fmt: skip
        assert {i["subject"] for i in items} == {f"Event {n}" for n in mine}
    assert len(set(ids)) == 48


def test_eight_threads_starting_at_once_build_one_token_source(
    make_provider: MakeProvider, graph: GraphControl, make_account: MakeAccount, make_event: MakeEvent
) -> None:
    provider = make_provider()
    account = make_account()
    start = threading.Barrier(8)

    def sync(n: int) -> str:
        event = make_event(id=f"evt-{n}")
        start.wait(timeout=10)
        return provider.upsert(account, event, target_for(account, event)).external_id

    with ThreadPoolExecutor(max_workers=8) as pool:
        ids = list(pool.map(sync, range(8)))
    assert len(set(ids)) == 8
    discovery = [r for r in graph.requests() if r["path"].endswith("/.well-known/openid-configuration")]
    assert (len(discovery), len(graph.requests("token"))) == (1, 1)  # not one msal app and token per thread

"""Graph creates in one thread, in process: Python calls, CPU and Redis commands per create (issue 15).

    PYTHONPATH=.:emulators .venv/bin/python benchmarks/graph_calls.py [--creates 1000] [--rounds 3]
        [--redis-url URL]

The Graph adapter as a worker builds it (the registry's settings; the Redis mailbox limiter, as actors/worker.py
gives it) against the Exchange emulator's Graph front, over https, in a child process. One thread creates
``--creates`` events of one mailbox per round. It prints cProfile's Python calls per create (exact, whatever
the load; one profiled round), the CPU per create of each round and the Redis commands per create (INFO
commandstats of its own embedded Redis, scripts' inner commands included). To compare trees, put the other
checkout first on PYTHONPATH (``PYTHONPATH=/other:/other/emulators python benchmarks/graph_calls.py``). It also times
one response through httpx's default cookie jar and through the adapter's (which refuses every cookie).
It is a benchmark, not a test: numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import cProfile
import dataclasses
import datetime as dt
import http.cookiejar
import multiprocessing
import pstats
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import redis

from benchmarks.support import add_redis_option, bench_redis
from calsync.core.model.calendar import Account, EventState, Target
from calsync.core.redis.keys import RedisKeys
from calsync.core.redis.limiter import RedisLimiter
from calsync.providers.registry import ProviderRegistry
from calsync_emulators import graph
from calsync_emulators.control import GraphControl
from calsync_emulators.server import RunningEmulator
from tests.support import make_settings

_EVENT = EventState(id="e", tenant_id="t1", version=1, title="Standup", start=dt.datetime(2030, 1, 2, 10, 0),
                    end=dt.datetime(2030, 1, 2, 10, 30), time_zone="Europe/Copenhagen", all_day=False,
                    location="Room 1", attendees=("bob@example.com",), send_updates="all")  # fmt: skip


def _serve(queue: Any, scratch: str) -> None:
    tls = graph.self_signed(Path(scratch))
    server = RunningEmulator(graph.create_app(), tls=tls.context)
    queue.put((server.url, str(tls.ca_file)))
    threading.Event().wait()


def _limiter(client: redis.Redis) -> RedisLimiter:
    return RedisLimiter(client, RedisKeys("bench-graph-calls"), limit=8, lease=35, wait=5)


def _commands(client: redis.Redis) -> int:
    return sum(int(stats["calls"]) for stats in client.info("commandstats").values())


def _cookies() -> None:
    request = httpx.Request(
        "POST",
        "https://127.0.0.1/v1.0/users/a@example.com/calendar/events",
        headers={"Authorization": "Bearer " + "x" * 900, "Content-Type": "application/json"},
    )
    response = httpx.Response(201, request=request, headers={"Content-Type": "application/json", "ETag": 'W/"1"',
                                                              "Date": "Wed, 02 Dec 2026 03:00:00 GMT"})  # fmt: skip
    sides: dict[str, httpx.Cookies] = {"httpx's default jar": httpx.Cookies(http.cookiejar.CookieJar())}
    # The adapter's jar refuses every cookie (a policy that allows no domain); httpx still hands it each response.
    refusing = http.cookiejar.CookieJar(http.cookiejar.DefaultCookiePolicy(allowed_domains=[]))
    sides["the adapter's jar"] = httpx.Cookies(refusing)
    for name, cookies in sides.items():
        profile = cProfile.Profile()
        profile.runcall(lambda jar=cookies: [jar.extract_cookies(response) for _ in range(1000)])
        start = time.process_time()
        for _ in range(20_000):
            cookies.extract_cookies(response)
        cpu = (time.process_time() - start) / 20_000 * 1e6
        print(f"  cookies, {name}: {pstats.Stats(profile).total_calls / 1000:.0f} calls, {cpu:.1f} µs per response")


def main() -> None:
    """Run the rounds and print their counts."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--creates", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    add_redis_option(parser)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch, bench_redis(args.redis_url, Path(scratch)) as redis_url:
        queue: Any = multiprocessing.get_context("spawn").Queue()
        child = multiprocessing.get_context("spawn").Process(target=_serve, args=(queue, scratch), daemon=True)
        child.start()
        try:
            url, ca_file = queue.get(timeout=60)
            control = GraphControl(url)
            control.configure(mailbox_concurrency=8)
            settings = make_settings(Path(scratch), worker_threads=8, graph_api_endpoint=control.api_endpoint,
                                     graph_ca_file=Path(ca_file))  # fmt: skip
            client = redis.Redis.from_url(redis_url, health_check_interval=30)
            provider = ProviderRegistry(settings, limiter=_limiter(client)).get("graph")
            account = Account("acc-1", "t1", "graph", "coo@example.com", credentials=control.app_credentials())
            serial = iter(range(10**9))

            def creates(count: int) -> None:
                for _ in range(count):
                    event = dataclasses.replace(_EVENT, id=f"e{next(serial)}")
                    # Each job decrypts its account anew: fresh dicts, as the worker hands the adapter.
                    fresh = dataclasses.replace(account, credentials=dict(account.credentials))
                    provider.upsert(fresh, event, Target(event.id, account.id, "t1"))

            creates(50)  # the token, the connection, caches
            profile = cProfile.Profile()
            profile.runcall(creates, args.creates)
            print(f"Graph creates, one thread, {args.creates} per round; Redis {redis_url}")
            print(f"  Python calls per create (cProfile): {pstats.Stats(profile).total_calls / args.creates:.0f}")
            for n in range(args.rounds):
                before, start = _commands(client), time.process_time()
                creates(args.creates)
                cpu = (time.process_time() - start) / args.creates * 1000
                per = (_commands(client) - before - 1) / args.creates  # INFO itself counts once
                print(f"  round {n + 1}: {cpu:.3f} ms CPU per create (emulator apart), {per:.1f} Redis commands")
            provider.close()
            client.close()
        finally:
            child.kill()
    _cookies()


if __name__ == "__main__":
    main()

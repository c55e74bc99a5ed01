"""Each account's breaker as the console's accounts page reads it: what the settle script wrote, open, half-open once
its open time passed, closed after a success; the same count as the provider's reading (``circuits``)."""

from __future__ import annotations

import redis

from calsync.core.redis.keys import RedisKeys
from calsync.core.traffic import Limits, TrafficStore
from tests.support import wait_until

SHORT = Limits(breaker_failures=2, breaker_open=0.3)
LONG = Limits(breaker_failures=2, breaker_open=60)


def _fail(traffic: TrafficStore, account: str, limits: Limits, times: int) -> None:
    """``times`` failed calls to ``account``, all about one event (so the provider's breaker stays closed)."""
    for n in range(times):
        call = traffic.admit("graph", account, "tenant-1", limits, limits.concurrency)
        assert call.admitted
        traffic.settle("graph", account, call, limits, "failure", job=(f"job-{account}-{n}", 1), event="evt-1")


def test_each_accounts_breaker_open_half_open_and_closed(client: redis.Redis, namespace: str) -> None:
    traffic = TrafficStore(client, RedisKeys(namespace))
    _fail(traffic, "stuck", LONG, 2)
    _fail(traffic, "probing", SHORT, 2)
    _fail(traffic, "healed", SHORT, 2)
    wait_until(lambda: traffic.account_circuits("graph", ["probing"])["probing"] == "half_open", what="half-open")
    probe = traffic.admit("graph", "healed", "tenant-1", SHORT, SHORT.concurrency)
    assert probe.admitted
    traffic.settle("graph", "healed", probe, SHORT, "success")
    states = traffic.account_circuits("graph", ["stuck", "probing", "healed", "never-failed"])
    assert states == {"stuck": "open", "probing": "half_open", "healed": "closed", "never-failed": "closed"}
    reading = traffic.circuits("graph")
    assert (reading.accounts_open, reading.accounts_half_open) == (1, 1)
    assert traffic.account_circuits("graph", []) == {}

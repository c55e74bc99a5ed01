"""The traffic scripts on a real Redis: concurrency, buckets, "blocked until", breakers, one probe at a time."""

from __future__ import annotations

import threading

import redis

from calsync.core.redis.keys import RedisKeys
from calsync.core.traffic import Limits, TrafficStore
from calsync.core.traffic.store import Admission
from tests.support import wait_until

LIMITED = Limits(concurrency=2)
BREAKER = Limits(concurrency=4, breaker_failures=3, breaker_open=0.3)


def store(client: redis.Redis, namespace: str) -> TrafficStore:
    """A worker process's store on this test's namespace."""
    return TrafficStore(client, RedisKeys(namespace))


def admit(traffic: TrafficStore, account: str, limits: Limits, tenant: str = "tenant-1") -> Admission:
    """Ask to call ``account`` of the graph provider."""
    return traffic.admit("graph", account, tenant, limits, limits.concurrency)


def test_at_most_the_concurrency_limit_is_admitted_and_a_settled_call_frees_its_slot(
    client: redis.Redis, namespace: str
) -> None:
    one, other = store(client, namespace), store(client, namespace)  # two processes
    first, second = admit(one, "a", LIMITED), admit(other, "a", LIMITED)
    assert first.admitted and second.admitted
    third = admit(one, "a", LIMITED)
    assert not third.admitted and third.reason == "concurrency" and third.wait == LIMITED.retry_delay
    assert admit(one, "b", LIMITED).admitted  # another account has its own slots
    other.settle("graph", "a", second, LIMITED, "success")
    assert admit(one, "a", LIMITED).admitted


def test_many_threads_never_hold_more_slots_than_the_limit(client: redis.Redis, namespace: str) -> None:
    """Each holder stays in until one too many is in flight (or a moment passed): an extra admission is seen."""
    limits, calls, threads = Limits(concurrency=3), 40, 12
    in_flight, highest, done = [0], [0], [0]
    guard = threading.Condition()

    def worker() -> None:
        traffic = store(client, namespace)
        while True:
            with guard:
                if done[0] >= calls:
                    return
            admission = admit(traffic, "mailbox", limits)
            if not admission.admitted:
                continue
            with guard:
                in_flight[0] += 1
                highest[0] = max(highest[0], in_flight[0])
                guard.notify_all()
                guard.wait_for(lambda: in_flight[0] > limits.concurrency, timeout=0.05)
                in_flight[0] -= 1
                done[0] += 1
            traffic.settle("graph", "mailbox", admission, limits, "success")

    running = [threading.Thread(target=worker) for _ in range(threads)]
    for thread in running:
        thread.start()
    for thread in running:
        thread.join(timeout=60)
    assert done[0] >= calls and 1 < highest[0] <= limits.concurrency


def test_an_empty_bucket_answers_how_long_until_its_next_token(client: redis.Redis, namespace: str) -> None:
    traffic = store(client, namespace)
    account = Limits(account_rate=1, burst=2)  # holds two tokens, one more per second
    assert admit(traffic, "a", account).admitted and admit(traffic, "a", account).admitted
    refused = admit(traffic, "a", account)
    assert not refused.admitted and refused.reason == "account_rate" and 0 < refused.wait <= 1
    assert admit(traffic, "b", account).admitted
    tenant = Limits(tenant_rate=1, burst=1)
    assert admit(traffic, "c", tenant, tenant="t2").admitted
    refused = admit(traffic, "d", tenant, tenant="t2")  # another account, the same tenant's bucket
    assert not refused.admitted and refused.reason == "tenant_rate"
    provider = Limits(provider_rate=1, burst=1)
    assert admit(traffic, "e", provider, tenant="t3").admitted
    refused = admit(traffic, "f", provider, tenant="t4")
    assert not refused.admitted and refused.reason == "provider_rate"


def test_a_back_off_blocks_its_account_or_its_whole_provider(client: redis.Redis, namespace: str) -> None:
    traffic = store(client, namespace)
    throttled = admit(traffic, "a", LIMITED)
    traffic.settle("graph", "a", throttled, LIMITED, "neutral", ("account", 30))
    blocked = admit(traffic, "a", LIMITED)
    assert not blocked.admitted and blocked.reason == "account_blocked" and 29 < blocked.wait <= 30
    assert admit(traffic, "b", LIMITED).admitted
    project = admit(traffic, "b", LIMITED)
    traffic.settle("graph", "b", project, LIMITED, "neutral", ("provider", 60))
    everyone = admit(traffic, "c", LIMITED)
    assert not everyone.admitted and everyone.reason == "provider_blocked" and 59 < everyone.wait <= 60


def test_consecutive_failures_open_the_breaker_then_one_probe_and_a_success_closes_it(
    client: redis.Redis, namespace: str
) -> None:
    traffic = store(client, namespace)
    for n in range(BREAKER.breaker_failures):
        call = admit(traffic, f"acc{n}", BREAKER)
        assert call.admitted
        settled = traffic.settle("graph", f"acc{n}", call, BREAKER, "failure")
    assert settled.provider_open > 0  # the third failure in a row opened the provider's breaker
    held = admit(traffic, "acc9", BREAKER)
    assert not held.admitted and held.reason == "provider_circuit" and 0 < held.wait <= BREAKER.breaker_open
    assert traffic.circuits("graph").state == "open"

    probe = wait_until(lambda: (a := admit(traffic, "acc9", BREAKER)).admitted and a, what="the half-open probe")
    assert probe.probes == 1 and traffic.circuits("graph").state == "half_open"
    second = admit(traffic, "acc8", BREAKER)
    assert not second.admitted and second.reason == "provider_circuit"  # one probe at a time
    traffic.settle("graph", "acc9", probe, BREAKER, "failure")  # one account's failed probe: the next one may go
    assert traffic.circuits("graph").state == "half_open"
    for n in range(1, BREAKER.breaker_failures):  # as many accounts failed again: it reopens
        probe = admit(traffic, f"acc{9 - n}", BREAKER)
        assert probe.admitted and probe.probes == 1
        traffic.settle("graph", f"acc{9 - n}", probe, BREAKER, "failure")
    assert traffic.circuits("graph").state == "open"

    probe = wait_until(lambda: (a := admit(traffic, "acc9", BREAKER)).admitted and a, what="the next probe")
    assert traffic.settle("graph", "acc9", probe, BREAKER, "success").provider_open == 0
    assert traffic.circuits("graph").state == "closed"
    assert admit(traffic, "acc8", BREAKER).admitted and admit(traffic, "acc7", BREAKER).admitted


def test_a_success_in_between_resets_the_count_and_throttles_or_refusals_do_not_count(
    client: redis.Redis, namespace: str
) -> None:
    traffic = store(client, namespace)
    endings = ["failure", "failure", "success", "failure", "failure", "neutral", "neutral", "neutral"]
    for ending in endings:
        call = admit(traffic, "a", BREAKER)
        assert call.admitted, f"held before {ending}"
        traffic.settle("graph", "a", call, BREAKER, ending)  # type: ignore[arg-type]
    assert traffic.circuits("graph").state == "closed"


def test_credential_failures_open_only_their_account_breaker(client: redis.Redis, namespace: str) -> None:
    traffic = store(client, namespace)
    for n in range(BREAKER.breaker_failures * 3):
        account = f"acc{n % 3}"
        call = admit(traffic, account, BREAKER)
        if call.admitted:
            traffic.settle("graph", account, call, BREAKER, "account_failure")
    reading = traffic.circuits("graph")
    assert reading.state == "closed" and reading.accounts_open == 3 and reading.accounts_state == "open"
    held = admit(traffic, "acc0", BREAKER)
    assert not held.admitted and held.reason == "account_circuit"
    assert admit(traffic, "healthy", BREAKER).admitted


def _failed(traffic: TrafficStore, account: str, event: str, limits: Limits = BREAKER) -> None:
    call = admit(traffic, account, limits)
    assert call.admitted, f"{account} held before its failure"
    traffic.settle("graph", account, call, limits, "failure", job=(f"job-{account}-{event}", 1), event=event)


def test_one_accounts_failures_open_its_breaker_never_the_providers(client: redis.Redis, namespace: str) -> None:
    traffic, limits = store(client, namespace), Limits(breaker_failures=3, breaker_open=60)
    for n in range(limits.breaker_failures):  # a broken mailbox: every event of it fails
        _failed(traffic, "broken", f"tenant-1/evt{n}", limits)
    reading = traffic.circuits("graph")
    assert reading.accounts_open == 1 and reading.state == "closed"
    assert not admit(traffic, "broken", limits).admitted and admit(traffic, "healthy", limits).admitted


def test_one_events_failures_on_many_accounts_never_open_the_providers_breaker(
    client: redis.Redis, namespace: str
) -> None:
    traffic, limits = store(client, namespace), Limits(breaker_failures=3, breaker_open=60)
    for n in range(limits.breaker_failures * 2):  # one bad event, shown in many accounts
        _failed(traffic, f"acc{n}", "tenant-1/bad", limits)
    assert traffic.circuits("graph").state == "closed" and admit(traffic, "healthy", limits).admitted


def test_failures_of_as_many_accounts_and_events_as_breaker_failures_open_the_providers_breaker(
    client: redis.Redis, namespace: str
) -> None:
    traffic, limits = store(client, namespace), Limits(breaker_failures=3, breaker_open=60)
    _failed(traffic, "acc0", "tenant-1/evt0", limits)
    _failed(traffic, "acc0", "tenant-1/evt1", limits)  # two events, one account so far
    _failed(traffic, "acc1", "tenant-1/evt1", limits)
    assert traffic.circuits("graph").state == "closed"  # two accounts, two events: not yet
    _failed(traffic, "acc2", "tenant-2/evt2", limits)
    assert traffic.circuits("graph").state == "open"
    held = admit(traffic, "healthy", limits)
    assert not held.admitted and held.reason == "provider_circuit"

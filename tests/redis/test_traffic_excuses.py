"""Which temporary failures the settle script excuses (the job keeps its attempt) and which it charges."""

from __future__ import annotations

import redis

from calsync.core.traffic import Limits, TrafficStore
from calsync.core.traffic.store import Admission, Excuse
from tests.redis.test_traffic_store import store

BREAKER = Limits(breaker_failures=3, breaker_open=60)  # no concurrency limit; a breaker once open stays open


def admitted(traffic: TrafficStore, count: int, limits: Limits = BREAKER) -> list[Admission]:
    """``count`` calls admitted at once, before any of them fails (and opens a breaker)."""
    calls = [traffic.admit("graph", "acc", "tenant-1", limits, 0) for _ in range(count)]
    assert all(call.admitted for call in calls)
    return calls


def fail(traffic: TrafficStore, call: Admission, job: str, attempt: int = 1, *, account: str = "acc",
         limits: Limits = BREAKER, event: str | None = None) -> Excuse | None:  # fmt: skip
    """``call`` of ``job`` (about its own event unless told) failed temporarily: how the settle script judged it."""
    about = event or f"tenant-1/{job}"
    return traffic.settle("graph", account, call, limits, "failure", job=(job, attempt), event=about).excuse


def succeed(traffic: TrafficStore, call: Admission, limits: Limits = BREAKER) -> None:
    """``call`` of another job, to another account, succeeded."""
    traffic.settle("graph", "other", call, limits, "success", job=("busy", 1))


def test_an_outage_excuses_every_failure_the_first_of_the_streak_included(client: redis.Redis, namespace: str) -> None:
    traffic = store(client, namespace)
    calls = admitted(traffic, 5)
    excuses = [fail(traffic, call, f"job{n}", account=f"acc{n}") for n, call in enumerate(calls)]
    assert excuses == ["first_failure", "provider_streak", "circuit", "circuit", "circuit"]  # the third opened it
    assert traffic.circuits("graph").state == "open"


def test_a_job_failing_alone_is_charged_from_its_second_failure_of_each_attempt(
    client: redis.Redis, namespace: str
) -> None:
    limits = Limits(breaker_failures=5, breaker_open=60)
    traffic = store(client, namespace)
    c = admitted(traffic, 6, limits)
    assert [fail(traffic, c[0], "lone", limits=limits), fail(traffic, c[1], "lone", limits=limits)] == [
        "first_failure", None]  # fmt: skip
    succeed(traffic, c[2], limits)  # the provider is healthy for everyone else: the streak starts again
    assert fail(traffic, c[3], "lone", 2, limits=limits) == "first_failure"
    assert fail(traffic, c[4], "lone", 2, limits=limits) is None
    assert fail(traffic, c[5], "lone", 3, limits=limits) == "circuit"  # its account's fifth failure in a row
    assert traffic.circuits("graph").accounts_open == 1 and traffic.circuits("graph").state == "closed"


def test_a_success_in_between_ends_the_streak_so_the_next_failure_is_alone(client: redis.Redis, namespace: str) -> None:
    traffic = store(client, namespace)
    c = admitted(traffic, 4)
    assert fail(traffic, c[0], "a", account="acc-a") == "first_failure"
    succeed(traffic, c[1])
    assert fail(traffic, c[2], "c", account="acc-c") == "first_failure"
    assert fail(traffic, c[3], "c", account="acc-c") is None


def test_a_job_is_excused_at_most_breaker_failures_times_per_attempt(client: redis.Redis, namespace: str) -> None:
    traffic = store(client, namespace)
    first, *calls, later = admitted(traffic, 7)
    assert fail(traffic, first, "other", account="elsewhere") == "first_failure"
    excuses = [fail(traffic, call, "stuck") for call in calls]
    # another account's and event's failure shares the streak; the third failure of "acc" opened its breaker
    assert excuses == ["provider_streak", "provider_streak", "circuit", None, None]  # 3 excused, then charged
    assert fail(traffic, later, "stuck", attempt=2) == "circuit"  # a new attempt has its own allowance


def test_nothing_is_excused_without_a_job_or_a_breaker(client: redis.Redis, namespace: str) -> None:
    traffic = store(client, namespace)
    call, neutral = admitted(traffic, 2)
    assert traffic.settle("graph", "acc", call, BREAKER, "failure").excuse is None
    assert traffic.settle("graph", "acc", neutral, BREAKER, "neutral", job=("j", 1)).excuse is None
    off = Limits(concurrency=2)
    call = traffic.admit("graph", "acc", "tenant-1", off, 2)
    assert traffic.settle("graph", "acc", call, off, "failure", job=("j", 1)).excuse is None


def test_a_streak_shared_only_by_one_accounts_jobs_excuses_none_of_them(client: redis.Redis, namespace: str) -> None:
    limits = Limits(breaker_failures=5, breaker_open=60)
    traffic = store(client, namespace)
    c = admitted(traffic, 4, limits)
    assert fail(traffic, c[0], "a", limits=limits) == "first_failure"
    assert fail(traffic, c[1], "b", limits=limits) == "first_failure"  # another job of the same account: its own
    assert fail(traffic, c[2], "a", limits=limits) is None  # charged: a broken mailbox is no outage
    assert fail(traffic, c[3], "c", account="other", limits=limits) == "provider_streak"  # another account too


def test_a_streak_shared_only_by_one_events_jobs_excuses_none_of_them(client: redis.Redis, namespace: str) -> None:
    limits = Limits(breaker_failures=5, breaker_open=60)
    traffic = store(client, namespace)
    c = admitted(traffic, 3, limits)
    bad = "tenant-1/bad"
    assert fail(traffic, c[0], "a", account="acc-a", limits=limits, event=bad) == "first_failure"
    assert fail(traffic, c[1], "b", account="acc-b", limits=limits, event=bad) == "first_failure"
    assert fail(traffic, c[2], "a", account="acc-a", limits=limits, event=bad) is None

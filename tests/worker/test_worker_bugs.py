"""An error of calsync's own code before any provider request: never a provider failure, and the same one on two
attempts in a row is dead-lettered as a worker bug; an error after a request still walks the schedule. Real
worker threads on the real broker, the memory provider wrapped by one whose code fails."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from calsync.core.model.calendar import Account, EventState, ExternalRef, Target
from calsync.core.model.provider_io import request_sent
from calsync.core.model.vocabulary import DeadLetterCause
from calsync.core.traffic import TrafficStore
from calsync.providers.memory import MemoryProvider
from tests.support import Pipeline, wait_until

BAD_TITLE = "Bad"


class FailingProvider(MemoryProvider):
    """The memory provider whose code for a :data:`BAD_TITLE` event raises (as EWS's ``OverflowError`` for
    9999-12-31 in Los Angeles did): before any request, or after one (``after_request``)."""

    def __init__(self, *, after_request: bool = False) -> None:
        super().__init__()
        self.after_request = after_request

    def upsert(self, account: Account, event: EventState, target: Target) -> ExternalRef:
        if event.title == BAD_TITLE:
            if self.after_request:
                request_sent()
            raise OverflowError("date value out of range")
        return super().upsert(account, event, target)


def _pipeline(settings_factory: Any, provider: MemoryProvider, **governed: Any) -> Pipeline:
    return Pipeline(settings_factory(retry_schedule=(0.1, 0.1, 0.1), **governed), provider)


@pytest.fixture
def governed(settings_factory: Any) -> Iterator[Pipeline]:
    """Breakers after 2 failures, open for a minute: a breaker once open stays open for the whole test."""
    built = _pipeline(settings_factory, FailingProvider(), account_concurrency="memory=4",
                      breaker_failures="memory=2", breaker_open_seconds=60, traffic_retry_delay=0.05)  # fmt: skip
    yield built
    built.close()


def test_our_own_error_before_any_request_counts_toward_no_breaker_and_is_never_excused(governed: Pipeline) -> None:
    names = [governed.account(account_id=f"acc{n}") for n in range(3)]
    bad = [governed.submit(names, title=BAD_TITLE) for _ in range(3)]  # 9 failing jobs, 3 accounts, 3 events
    with governed.worker():
        wait_until(lambda: len(governed.dead_letters()) == len(bad) * len(names), what="every bad job dead-lettered")
        good = governed.submit(names)
        for name in names:
            governed.wait_target(good.entity_id, name, "synced")
    reading = TrafficStore(governed.clients.redis, governed.clients.keys).circuits("memory")
    assert reading.state == "closed" and reading.accounts_open == 0 and reading.accounts_half_open == 0
    assert "deferred" not in governed.outcomes()  # no failure was excused as an outage


def test_the_same_error_twice_before_any_request_is_dead_lettered_as_a_worker_bug(settings_factory: Any) -> None:
    pipeline = _pipeline(settings_factory, FailingProvider())
    try:
        account = pipeline.account()
        receipt = pipeline.submit([account], title=BAD_TITLE)
        with pipeline.worker():
            (record,) = wait_until(pipeline.dead_letters, what="the bad job dead-lettered")
        assert (record.cause, record.reason, record.attempts) == (DeadLetterCause.WORKER_BUG, "worker bug", 2)
        assert record.error_class == "OverflowError" and "before any provider request" in record.last_error
        assert [(e["attempt"], e["provider_io"]) for e in record.error_history] == [(1, False), (2, False)]
        assert pipeline.outcomes().get("retry_scheduled") == 1  # one retry, not the whole schedule
        assert pipeline.target(receipt.entity_id, account).status == "failed"
    finally:
        pipeline.close()


def test_the_same_error_after_a_request_still_walks_the_whole_schedule(settings_factory: Any) -> None:
    pipeline = _pipeline(settings_factory, FailingProvider(after_request=True))
    try:
        account = pipeline.account()
        pipeline.submit([account], title=BAD_TITLE)
        with pipeline.worker():
            (record,) = wait_until(pipeline.dead_letters, what="the bad job dead-lettered")
        schedule = pipeline.settings.retry_schedule
        assert (record.cause, record.attempts) == (DeadLetterCause.EXHAUSTED, len(schedule) + 1)
        assert all(entry["provider_io"] for entry in record.error_history)
        assert pipeline.outcomes().get("retry_scheduled") == len(schedule)
    finally:
        pipeline.close()

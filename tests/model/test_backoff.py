"""Retry delays: schedule entry ± jitter, the last entry repeats, a retry-after hint is a floor."""

from __future__ import annotations

import random

from calsync.core.model.backoff import jittered, retry_delay

SCHEDULE = (10, 30, 120, 300, 900)


def test_each_retry_takes_its_schedule_entry_within_the_jitter() -> None:
    rng = random.Random(7)
    for retries, base in enumerate(SCHEDULE):
        delays = [retry_delay(SCHEDULE, retries, jitter=0.2, rng=rng) for _ in range(500)]
        assert base * 0.8 <= min(delays) and max(delays) <= base * 1.2
        assert max(delays) - min(delays) > base * 0.3  # the jitter really spreads them


def test_retries_past_the_schedule_repeat_its_last_entry() -> None:
    assert retry_delay(SCHEDULE, 9, jitter=0) == 900


def test_a_retry_after_hint_is_a_floor_not_a_cap() -> None:
    assert retry_delay(SCHEDULE, 0, jitter=0, retry_after=45) == 45
    assert retry_delay(SCHEDULE, 2, jitter=0, retry_after=45) == 120


def test_no_jitter_means_exact_delays() -> None:
    assert jittered(30, 0) == 30

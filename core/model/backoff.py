"""Retry delays: the fixed schedule with ± jitter, and a provider's retry-after hint as a floor."""

from __future__ import annotations

import random
from collections.abc import Sequence


def jittered(seconds: float, jitter: float, rng: random.Random | None = None) -> float:
    """``seconds`` spread uniformly by ± ``jitter`` (a fraction) so retries after an outage do not stampede."""
    return seconds * (rng or random).uniform(1 - jitter, 1 + jitter)


def retry_delay(
    schedule: Sequence[float],
    retries_so_far: int,
    *,
    jitter: float,
    retry_after: float | None = None,
    rng: random.Random | None = None,
) -> float:
    """Seconds to wait before the next attempt: the schedule's entry (the last one repeats), never below
    the provider's hint."""
    base = schedule[min(retries_so_far, len(schedule) - 1)]
    delay = jittered(base, jitter, rng)
    return max(delay, retry_after) if retry_after is not None else delay

"""The start-up check on the lock timings: a crashed worker's job must outwait its dead owner's lock."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from calsync.core.config.settings import Settings


def test_the_defaults_leave_the_wait_budget_longer_than_the_lock() -> None:
    settings = Settings()
    budget = settings.lock_max_waits * settings.lock_retry_delay * (1 - settings.retry_jitter)
    assert settings.lock_ttl <= settings.broker_heartbeat_timeout + budget


@pytest.mark.parametrize(
    "values",
    [
        {"lock_ttl": 90},  # 90 > 20 + 30 x 2 x 0.8 = 68
        {"lock_max_waits": 10},  # 60 > 20 + 16
        {"lock_retry_delay": 1},  # 60 > 20 + 24
        {"broker_heartbeat_timeout": 5, "lock_max_waits": 20},  # 60 > 5 + 32
    ],
)
def test_a_lock_that_outlives_the_wait_budget_is_rejected_naming_the_settings(values: dict[str, float]) -> None:
    with pytest.raises(ValidationError) as caught:
        Settings(**values)
    message = str(caught.value)
    for name in ("CALSYNC_LOCK_TTL", "CALSYNC_BROKER_HEARTBEAT_TIMEOUT", "CALSYNC_LOCK_MAX_WAITS",
                 "CALSYNC_LOCK_RETRY_DELAY"):  # fmt: skip
        assert name in message


def test_a_longer_budget_makes_a_longer_lock_possible() -> None:
    assert Settings(lock_ttl=90, lock_max_waits=45).lock_ttl == 90  # 90 <= 20 + 45 x 2 x 0.8 = 92

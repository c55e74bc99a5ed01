"""The per-endpoint breaker, and a receiver too slow to answer: neither holds up calendar syncs."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from calsync.core.producer.dead_letters import replay
from calsync.core.webhooks.deliverer import ENDPOINTS_DISABLED
from tests.support import wait_until
from tests.webhooks.conftest import Hooks
from tests.webhooks.receiver import Receiver, serve

pytestmark = pytest.mark.integration


@pytest.fixture
def failing() -> Iterator[Receiver]:
    """Answers 503 until the test fixes it."""
    yield from serve(Receiver(answer=lambda n: 503))


def test_an_endpoint_failing_long_enough_is_disabled_until_the_operator_enables_it(
    hooks_factory: Callable[..., Hooks], failing: Receiver
) -> None:
    hooks = hooks_factory(webhook_disable_after=0.01, webhook_disable_min_failures=2,
                          webhook_retry_schedule=(0.05,) * 6)  # fmt: skip
    pipeline = hooks.pipeline
    endpoint_id = hooks.endpoint(failing)
    tripped = ENDPOINTS_DISABLED._value.get()
    with pipeline.worker():
        pipeline.submit([pipeline.account()])
        (record,) = wait_until(lambda: pipeline.dead_letters(kind="webhook"), what="the dead letter")
        endpoint = hooks.endpoints.get(endpoint_id)
        assert endpoint.status == "disabled" and endpoint.disabled_by == "auto"
        assert "2 attempts in a row" in (endpoint.disabled_reason or "")
        assert ENDPOINTS_DISABLED._value.get() == tripped + 1
        assert len(failing.received) == 2  # never retried forever: the third attempt found it disabled
        assert record.reason == "webhook endpoint disabled"
        assert replay(pipeline.clients, [record]).skipped[0].why.endswith("enable it first")

        failing.answer = lambda n: 200
        enabled = hooks.endpoints.enable(endpoint_id)
        assert enabled.status == "enabled" and enabled.consecutive_failures == 0 and enabled.failing_since is None
        assert replay(pipeline.clients, [record]).replayed
        wait_until(lambda: len(failing.received) == 3 and failing.received[-1].status == 200, what="redelivery")
    assert len(set(failing.ids())) == 1


@pytest.fixture
def slow() -> Iterator[Receiver]:
    """Sleeps past the webhook timeout before every answer."""
    yield from serve(Receiver(delay=1.5))


def test_a_slow_receiver_times_out_and_never_delays_a_sync(hooks_factory: Callable[..., Hooks], slow: Receiver) -> None:
    hooks = hooks_factory(webhook_timeout=0.5, webhook_retry_schedule=(0.05,))
    pipeline = hooks.pipeline
    endpoint_id = hooks.endpoint(slow)
    account = pipeline.account()
    with pipeline.worker(threads=2):
        first = pipeline.submit([account], title="first")
        wait_until(lambda: slow.received, what="the first attempt")
        second = pipeline.submit([account], title="second")
        pipeline.wait_target(second.entity_id, account, "synced")  # while the delivery is still timing out
        (record,) = wait_until(lambda: pipeline.dead_letters(kind="webhook"), what="retries exhausted", timeout=30)
    assert record.reason == "webhook retries exhausted" and record.error_class == "ReadTimeout"
    assert record.payload["endpoint_id"] == endpoint_id and record.attempts == 2
    assert pipeline.target(first.entity_id, account).status == "synced"

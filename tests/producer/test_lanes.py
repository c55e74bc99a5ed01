"""The lane choice: a tenant past BULK_THRESHOLD jobs per BULK_WINDOW takes the bulk lane, others keep the normal one.

The counters are real Redis keys; the clock is given, so window edges are exact (docs/notes/fairness.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from calsync.core.config.settings import load_settings
from calsync.core.model.errors import ConfigurationError
from calsync.core.producer.dead_letters import replay
from calsync.core.producer.fairness import TenantLanes, lane_choice
from calsync.core.producer.reconcile import reconcile
from calsync.core.redis.keys import RedisKeys
from tests.support import Pipeline, wait_until

WINDOW = 60.0


class Clock:
    """A clock the test moves."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    connection = redis.Redis.from_url(redis_url)
    yield connection
    connection.close()


def _lanes(client: redis.Redis, namespace: str, clock: Clock, threshold: int = 3) -> TenantLanes:
    return TenantLanes(client, RedisKeys(namespace), threshold=threshold, window=WINDOW, clock=clock)


def test_a_flooding_tenant_overflows_to_the_bulk_lane_and_another_tenant_keeps_the_normal_one(
    client: redis.Redis, namespace: str
) -> None:
    clock = Clock(100 * WINDOW)  # the start of a window: the previous one has no weight left to give
    lanes = _lanes(client, namespace, clock)
    assert lanes.lanes("big", 2) == ["normal", "normal"]
    assert lanes.lanes("big", 3) == ["normal", "bulk", "bulk"]  # one more fits; the rest overflow
    assert lanes.lanes("big", 1) == ["bulk"]
    assert lanes.lanes("small", 1) == ["normal"]  # counted per tenant
    key = RedisKeys(namespace).tenant_enqueues("big", 100)
    assert int(client.get(key) or 0) == 6  # every job counts, whichever lane it took
    assert 0 < int(client.ttl(key)) <= 2 * WINDOW + 1  # gone two windows later: nothing to decrement, nothing to drift


def test_the_previous_window_weighs_as_much_of_it_as_is_still_inside_the_last_window(
    client: redis.Redis, namespace: str
) -> None:
    clock = Clock(100 * WINDOW + WINDOW / 2)
    lanes = _lanes(client, namespace, clock, threshold=4)
    assert lanes.lanes("big", 4) == ["normal"] * 4
    clock.now += WINDOW  # half of that window is still within the last WINDOW seconds: 4 x 0.5 = 2 count
    assert lanes.lanes("big", 3) == ["normal", "normal", "bulk"]
    clock.now += 2 * WINDOW  # both windows are older than the last WINDOW seconds
    assert lanes.lanes("big", 4) == ["normal"] * 4


def test_no_redis_means_the_normal_lane_and_a_zero_threshold_means_no_bulk_lane(
    namespace: str, settings_factory: Any
) -> None:
    down = redis.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.2)
    assert _lanes(down, namespace, Clock(0.0), threshold=1).lanes("big", 3) == ["normal"] * 3
    pipeline = Pipeline(settings_factory(bulk_threshold=0))
    try:
        assert lane_choice(pipeline.clients).lanes("big", 3) == ["normal"] * 3
        assert not pipeline.clients.redis.keys(f"{pipeline.settings.redis_namespace}:fair:*")  # nothing counted
    finally:
        pipeline.close()


def _ready(pipeline: Pipeline) -> tuple[int, int]:
    keys, settings = pipeline.clients.keys, pipeline.settings
    client = pipeline.clients.redis
    return int(client.llen(keys.ready_queue(settings.queue))), int(
        client.llen(keys.ready_queue(settings.effective_bulk_queue))
    )


def test_the_producer_enqueues_past_the_threshold_on_the_bulk_queue(settings_factory: Any) -> None:
    pipeline = Pipeline(settings_factory(bulk_threshold=3))
    try:
        big = [pipeline.account("big", f"big-{n}") for n in range(5)]
        small = pipeline.account("small", "small-1")
        pipeline.submit(big, tenant="big")
        assert _ready(pipeline) == (3, 2)  # the fan-out's first three jobs fit, two overflow
        pipeline.submit(big, tenant="big", title="Another")
        assert _ready(pipeline) == (3, 7)
        pipeline.submit([small], tenant="small")
        assert _ready(pipeline) == (4, 7)  # another tenant's change is not held to the flood's count

        # The reconciler re-enqueues lost jobs the same way: the flooding tenant is over its rate, so its ten
        # go to the bulk lane; the small tenant's one is within its own.
        report = reconcile(pipeline.clients, older_than=0)
        assert len(report.requeued) == 11 and _ready(pipeline) == (5, 17)
    finally:
        pipeline.close()


@pytest.mark.parametrize(("values", "clash"), [({"intake_queue": "calendar-bulk"}, "CALSYNC_INTAKE_QUEUE"),
                                               ({"bulk_queue": "calendar"}, "CALSYNC_QUEUE")])  # fmt: skip
def test_the_bulk_queue_must_be_a_queue_of_its_own(tmp_path: Path, values: dict[str, str], clash: str) -> None:
    with pytest.raises(ConfigurationError, match=f"CALSYNC_BULK_QUEUE must differ from {clash}"):
        load_settings(data_dir=tmp_path, **values)


def test_a_replay_of_a_tenants_dead_letters_past_its_rate_takes_the_bulk_lane(settings_factory: Any) -> None:
    pipeline = Pipeline(settings_factory(bulk_threshold=2))
    try:
        big = [pipeline.account("big", f"big-{n}") for n in range(2)]
        pipeline.provider.add_fault(error="invalid", times=2)  # permanent: both jobs are dead-lettered
        pipeline.submit(big, tenant="big")
        with pipeline.worker(threads=2):
            wait_until(lambda: len(pipeline.dead_letters(status="open")) == 2, what="two dead letters")
        assert _ready(pipeline) == (0, 0)
        report = replay(pipeline.clients, pipeline.dead_letters(status="open"))
        assert len(report.replayed) == 2 and _ready(pipeline) == (0, 2)  # the tenant's two jobs filled its window
    finally:
        pipeline.close()

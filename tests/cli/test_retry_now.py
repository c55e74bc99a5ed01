"""``calsync retry-now``: a retry parked for an hour runs now, once, whether a worker holds it or not."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from calsync.core.redis.keys import RedisKeys
from tests.cli.process import calsync, json_out, one_line_error
from tests.support import Pipeline, wait_until


def _delayed(pipeline: Pipeline) -> int:
    client = redis.Redis.from_url(pipeline.clients.broker_url)
    try:
        return int(client.hlen(RedisKeys(pipeline.settings.redis_namespace).delayed_messages(pipeline.settings.queue)))
    finally:
        client.close()


@pytest.mark.slow
def test_retry_now_pulls_a_parked_retry_forward_with_idempotency_intact(settings_factory: Any) -> None:
    settings = settings_factory(retry_schedule=(3600,), retry_jitter=0)
    pipeline = Pipeline(settings)
    try:
        account, other = pipeline.account(), pipeline.account(account_id="acc_other")
        pipeline.provider.add_fault(error="unavailable", times=2)
        held = pipeline.submit([account], title="Held by a worker")
        parked = pipeline.submit([other], title="Parked in the list")
        with pipeline.worker():
            wait_until(lambda: _delayed(pipeline) == 2, what="two retries parked for an hour")
        # The worker stopped: the delayed messages it held went back to the .DQ list (moved below); a new
        # worker prefetches them again into memory (copied below).
        refused = one_line_error(calsync("retry-now", settings=settings), 2)
        assert refused.endswith("nothing selected: give --account, --entity, --tenant, --reason or --all")
        moved = json_out(calsync("retry-now", "--account", other, settings=settings))
        assert (moved["moved"], moved["copied_from_workers"]) == (1, 0)
        with pipeline.worker():
            pipeline.wait_target(parked.entity_id, other, "synced")
            wait_until(lambda: _delayed(pipeline) == 1, what="the held retry prefetched again")
            copied = json_out(calsync("retry-now", "--reason", "provider unavailable", settings=settings))
            assert (copied["moved"] + copied["copied_from_workers"], copied["delayed_seen"]) == (1, 1)
            pipeline.wait_target(held.entity_id, account, "synced")
            again = json_out(calsync("retry-now", "--all", settings=settings))
            assert again["moved"] + again["copied_from_workers"] == 0
        # Each event reached its calendar once, however many deliveries there were.
        assert len(pipeline.provider.events(account)) == 1 and len(pipeline.provider.events(other)) == 1
    finally:
        pipeline.close()


def test_retry_now_pulls_forward_a_retry_of_the_bulk_lane_onto_the_bulk_lane(settings_factory: Any) -> None:
    settings = settings_factory(retry_schedule=(3600,), retry_jitter=0, bulk_threshold=1)
    pipeline = Pipeline(settings)
    try:
        first, second = pipeline.account(account_id="acc_first"), pipeline.account(account_id="acc_second")
        pipeline.provider.add_fault(error="unavailable", account_id=second, times=1)
        receipt = pipeline.submit([first, second])  # past BULK_THRESHOLD 1: the second job takes the bulk lane
        keys, bulk = pipeline.clients.keys, settings.effective_bulk_queue
        client = pipeline.clients.redis
        with pipeline.worker():
            wait_until(lambda: client.hlen(keys.delayed_messages(bulk)) == 1, what="the bulk job's retry parked")
        moved = json_out(calsync("retry-now", "--account", second, settings=settings))
        assert (moved["moved"], moved["delayed_seen"]) == (1, 1)
        assert client.llen(keys.ready_queue(bulk)) == 1 and client.llen(keys.ready_queue(settings.queue)) == 0
        with pipeline.worker():
            pipeline.wait_target(receipt.entity_id, second, "synced")
    finally:
        pipeline.close()

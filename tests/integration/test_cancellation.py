"""A cancellation cleans up after itself (memory provider): what was queued or delayed for the event is dropped as
stale without a provider call, the moment the last target goes is detected once, and after the retention the event,
its targets and its idempotency records are pruned."""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

import pytest

from calsync.core.producer.reconcile import reconcile
from calsync.core.store import events, targets
from calsync.core.store.pruning import Retention, prune
from calsync.core.store.schema import idempotency_records
from tests.support import Pipeline, wait_until

pytestmark = pytest.mark.integration

REMOVED = "cancelled event removed from every account"


def provider_ops(pipeline: Pipeline) -> list[tuple[str, str | None]]:
    """(op, effect or error) of every memory-provider call."""
    return [(c.op, c.effect or c.error) for c in pipeline.provider.calls()]


def test_jobs_queued_for_the_event_before_the_cancellation_are_dropped_as_stale(make_pipeline: Any) -> None:
    pipeline: Pipeline = make_pipeline(delete_verify_delay=3)
    a, b = pipeline.account(account_id="acc-a"), pipeline.account(account_id="acc-b")
    receipt = pipeline.submit([a, b], title="never shown")  # two creates queued, no worker yet
    cancelled = pipeline.submit(None, entity_id=receipt.entity_id, operation="delete")
    assert cancelled.version == 2
    with pipeline.worker():
        pipeline.wait_target(receipt.entity_id, a, "deleted")
        pipeline.wait_target(receipt.entity_id, b, "deleted")
        wait_until(lambda: pipeline.outcomes().get("stale") == 2, what="both creates to be dropped")
        wait_until(lambda: pipeline.outcomes().get("success") == 4, what="both deletes and their one re-run each")
        delayed = pipeline.clients.keys.delayed_messages(pipeline.settings.queue)
        assert pipeline.clients.redis.hlen(delayed) == 0  # a re-run schedules no other

    # The creates never reached the provider; each delete, knowing no id, looked for the event twice.
    assert provider_ops(pipeline) == [("delete", "already_gone")] * 4
    assert pipeline.outcomes() == {"stale": 2, "success": 4}


def test_a_delayed_retry_of_the_create_is_dropped_as_stale_after_the_cancellation(make_pipeline: Any) -> None:
    pipeline: Pipeline = make_pipeline(retry_schedule=(3, 3, 3), delete_verify_delay=0)
    account = pipeline.account()
    pipeline.provider.add_fault(error="unavailable", op="upsert", times=1)
    with pipeline.worker():
        receipt = pipeline.submit([account], title="retried")
        wait_until(lambda: pipeline.outcomes().get("retry_scheduled") == 1, what="the create's retry to be scheduled")
        pipeline.submit(None, entity_id=receipt.entity_id, operation="delete")
        pipeline.wait_target(receipt.entity_id, account, "deleted")
        wait_until(lambda: pipeline.outcomes().get("stale") == 1, what="the delayed retry to come up and be dropped")

    assert provider_ops(pipeline) == [("upsert", "ProviderUnavailable"), ("delete", "already_gone")]
    assert pipeline.outcomes() == {"retry_scheduled": 1, "success": 1, "stale": 1}
    assert pipeline.provider.events(account) == []


def test_the_last_deleted_target_is_detected_once_and_the_event_is_pruned_after_retention(
    make_pipeline: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="calsync.core.worker.cancellation")
    pipeline: Pipeline = make_pipeline()
    a, b = pipeline.account(account_id="acc-a"), pipeline.account(account_id="acc-b")
    with pipeline.worker(threads=1):  # one thread: the deletes commit one after the other
        receipt = pipeline.submit([a, b], title="soon gone")
        pipeline.wait_idle()
        pipeline.submit(None, entity_id=receipt.entity_id, operation="delete")
        pipeline.wait_target(receipt.entity_id, a, "deleted")
        pipeline.wait_target(receipt.entity_id, b, "deleted")
        wait_until(lambda: [r for r in caplog.records if r.getMessage() == REMOVED], what="the removal to be seen")
    assert [r.fields for r in caplog.records if r.getMessage() == REMOVED] == [{"version": 2}]  # type: ignore[attr-defined]
    assert {c.effect for c in pipeline.provider.calls()} == {"created", "deleted"}

    retention = Retention.of(pipeline.settings)
    db = pipeline.clients.db
    assert prune(db, retention).purged["events"] == 0  # within the retention: kept
    later = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=retention.cancelled_events + 1)
    report = reconcile(pipeline.clients, now=later).as_json()  # the reconciler's pass (workers run the same)
    assert (report["purged_events"], report["purged_event_targets"], report["housekeeping_caught_up"]) == (1, 2, True)
    with db.read() as conn:
        assert events.get_event(conn, "tenant-1", receipt.entity_id) is None
        assert targets.list_targets(conn, "tenant-1", receipt.entity_id) == []
        assert conn.execute(idempotency_records.select()).first() is None


@pytest.fixture
def make_pipeline(settings_factory: Any) -> Any:
    """Memory pipelines with settings overrides, closed after the test."""
    built: list[Pipeline] = []

    def make(**overrides: Any) -> Pipeline:
        built.append(Pipeline(settings_factory(**overrides)))
        return built[-1]

    yield make
    for made in built:
        made.close()

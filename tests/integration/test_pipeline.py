"""End to end on the real broker with real worker threads: producer → broker → middlewares → provider."""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import Any

import dramatiq
import pytest

from calsync.core.messaging.messages import sync_message
from calsync.core.model.payload import JobPayload, new_payload, parse_payload
from calsync.core.producer import dead_letters as dlq
from calsync.core.store import accounts, idempotency, targets
from calsync.core.store.targets import TargetKey
from calsync.providers.memory import external_id_for
from tests.spies import EnqueueSpy
from tests.support import Pipeline, wait_until

# The whole module runs on Redis and again on RabbitMQ.
pytestmark = [pytest.mark.integration, pytest.mark.both_brokers]


def _upsert_versions(pipeline: Pipeline) -> list[int]:
    return [c.version for c in pipeline.provider.calls() if c.op == "upsert" and c.effect and c.version]


@pytest.mark.both_databases
def test_a_submitted_event_is_synced_once(pipeline: Pipeline) -> None:
    account = pipeline.account()
    receipt = pipeline.submit([account], title="Kick-off", attendees=["ann@example.com"])
    assert receipt.version == 1 and len(receipt.job_ids) == 1

    with pipeline.worker():
        row = pipeline.wait_target(receipt.entity_id, account, "synced")

    assert row.synced_version == 1 and row.external_id
    [stored] = pipeline.provider.events(account)
    assert stored.external_id == row.external_id
    assert stored.body["title"] == "Kick-off" and stored.body["attendees"] == ["ann@example.com"]
    assert [c.effect for c in pipeline.provider.calls()] == ["created"]
    assert pipeline.outcomes() == {"success": 1}
    with pipeline.clients.db.read() as conn:
        assert idempotency.succeeded(conn, f"calendar:tenant-1:{receipt.entity_id}:{account}:create")


def test_three_quick_edits_end_on_the_latest_version(pipeline: Pipeline) -> None:
    account = pipeline.account()
    first = pipeline.submit([account], title="v1")
    pipeline.submit(None, entity_id=first.entity_id, title="v2")
    third = pipeline.submit(None, entity_id=first.entity_id, title="v3")
    assert third.version == 3

    def settled() -> bool:
        outcomes = pipeline.outcomes()
        return outcomes.get("success", 0) + outcomes.get("stale", 0) == 3

    with pipeline.worker(threads=4):
        wait_until(settled, what="all three jobs to finish")  # a stale job may still wait for the lock

    row = pipeline.target(first.entity_id, account)
    assert (row.status, row.synced_version) == ("synced", 3)
    [stored] = pipeline.provider.events(account)
    assert stored.body["title"] == "v3"
    assert _upsert_versions(pipeline) == [3]  # the two older jobs never reached the provider
    outcomes = pipeline.outcomes()
    assert outcomes["success"] == 1 and outcomes["stale"] == 2


def test_edits_racing_the_worker_never_move_the_provider_backwards(pipeline: Pipeline) -> None:
    account = pipeline.account()
    with pipeline.worker(threads=8):
        first = pipeline.submit([account], title="v1")
        for n in range(2, 9):
            pipeline.submit(None, entity_id=first.entity_id, title=f"v{n}")
        pipeline.wait_idle()

    versions = _upsert_versions(pipeline)
    assert versions == sorted(versions) and versions[-1] == 8
    [stored] = pipeline.provider.events(account)
    assert stored.body["title"] == "v8"
    assert pipeline.target(first.entity_id, account).synced_version == 8


def test_a_crash_between_provider_success_and_commit_makes_no_second_effect(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    account = pipeline.account()
    real = idempotency.record_success
    crashes = []

    def crash_once(*args: Any, **kwargs: Any) -> None:
        if not crashes:
            crashes.append(1)
            raise RuntimeError("worker died before the commit")
        real(*args, **kwargs)

    monkeypatch.setattr(idempotency, "record_success", crash_once)
    receipt = pipeline.submit([account])
    with pipeline.worker():
        pipeline.wait_target(receipt.entity_id, account, "synced")

    assert [c.effect for c in pipeline.provider.calls()] == ["created", "adopted"]
    assert len(pipeline.provider.events(account)) == 1
    assert pipeline.outcomes() == {"retry_scheduled": 1, "success": 1}


def test_duplicate_delivery_after_success_is_acked_as_already_done(pipeline: Pipeline) -> None:
    account = pipeline.account()
    receipt = pipeline.submit([account])
    with pipeline.worker(threads=1):
        pipeline.wait_target(receipt.entity_id, account, "synced")
        # The broker delivers the same logical job again (a worker died after the effect, before the ack).
        again = new_payload(
            tenant_id="tenant-1", entity_id=receipt.entity_id, account_id=account, operation="create", version=1,
            trace_id="trace-dup",
        )  # fmt: skip
        pipeline.broker.enqueue(sync_message(pipeline.settings.queue, again))
        wait_until(lambda: pipeline.outcomes().get("already_done") == 1, what="duplicate to be skipped")
    assert [c.effect for c in pipeline.provider.calls()] == ["created"]


def test_a_busy_lock_is_retried_later_without_burning_attempts(settings_factory: Any) -> None:
    # One retry in the budget: if lock waits counted as failures, the job would be dead-lettered.
    pipeline = Pipeline(settings_factory(retry_schedule=(0.2,), lock_retry_delay=0.05))
    try:
        account = pipeline.account()
        receipt = pipeline.submit([account])
        rt = pipeline.clients
        held = pipeline.app.locks.acquire(rt.keys.lock("tenant-1", receipt.entity_id, account))
        assert held is not None
        with pipeline.worker():
            wait_until(lambda: pipeline.outcomes().get("lock_busy", 0) >= 3, what="lock contention")
            pipeline.app.locks.release(held)
            pipeline.wait_target(receipt.entity_id, account, "synced")
        outcomes = pipeline.outcomes()
        assert outcomes["success"] == 1 and "retry_scheduled" not in outcomes and "dead_lettered" not in outcomes
        assert [c.effect for c in pipeline.provider.calls()] == ["created"]
    finally:
        pipeline.close()


def test_lock_waits_are_bounded(settings_factory: Any) -> None:
    pipeline = Pipeline(settings_factory(retry_schedule=(0.1,), lock_retry_delay=0.02, lock_max_waits=2,
                                         broker_heartbeat_timeout=8))  # fmt: skip
    try:
        account = pipeline.account()
        receipt = pipeline.submit([account])
        rt = pipeline.clients
        held = pipeline.app.locks.acquire(rt.keys.lock("tenant-1", receipt.entity_id, account))
        assert held is not None
        with pipeline.worker():
            pipeline.wait_target(receipt.entity_id, account, "failed")
        pipeline.app.locks.release(held)
        [record] = pipeline.dead_letters()
        assert (record.reason, record.error_class) == ("retries exhausted", "LockBusy")
        assert pipeline.provider.calls() == []
    finally:
        pipeline.close()


def test_temporary_failures_follow_the_schedule_then_succeed(settings_factory: Any) -> None:
    pipeline = Pipeline(settings_factory(retry_schedule=(0.3, 0.6, 0.9), retry_jitter=0.1))
    try:
        account = pipeline.account()
        pipeline.provider.add_fault(error="unavailable", times=2)
        receipt = pipeline.submit([account])
        with pipeline.worker():
            row = pipeline.wait_target(receipt.entity_id, account, "synced")
        calls = pipeline.provider.calls()
        assert [c.error or c.effect for c in calls] == ["ProviderUnavailable", "ProviderUnavailable", "created"]
        gaps = [later.at - earlier.at for earlier, later in itertools.pairwise(calls)]
        # Lower bounds only: a retry may come later than scheduled, never earlier.
        assert gaps[0] >= 0.3 * 0.9 and gaps[1] >= 0.6 * 0.9
        assert row.last_error is None
        assert pipeline.outcomes() == {"retry_scheduled": 2, "success": 1}
    finally:
        pipeline.close()


def test_a_retry_after_hint_is_a_floor_for_the_delay(settings_factory: Any) -> None:
    pipeline = Pipeline(settings_factory(retry_schedule=(0.05,), retry_jitter=0))
    try:
        account = pipeline.account()
        pipeline.provider.add_fault(error="rate_limited", retry_after=1.0, times=1)
        receipt = pipeline.submit([account])
        with pipeline.worker():
            pipeline.wait_target(receipt.entity_id, account, "synced")
        failed, succeeded = pipeline.provider.calls()
        assert succeeded.at - failed.at >= 1.0
    finally:
        pipeline.close()


def test_permanent_error_is_dead_lettered_completely_then_replayed_once(pipeline: Pipeline) -> None:
    account = pipeline.account()
    fault = pipeline.provider.add_fault(error="forbidden", message="calendar is read-only for this account")
    assert fault
    receipt = pipeline.producer.submit(
        "tenant-1",
        {"operation": "upsert", "accounts": [account], "event": {
            "title": "Board", "start": "2026-12-02T14:00:00", "end": "2026-12-02T15:00:00"}},
        trace_id="req_board_1",
    )  # fmt: skip
    with pipeline.worker():
        row = pipeline.wait_target(receipt.entity_id, account, "failed")
        assert row.error_class == "Forbidden"
        [record] = pipeline.dead_letters()
        assert record.job_id == receipt.job_ids[0]
        assert (record.job_type, record.tenant_id, record.entity_id, record.account_id) == (
            "sync_calendar_event", "tenant-1", receipt.entity_id, account)  # fmt: skip
        assert record.idempotency_key == f"calendar:tenant-1:{receipt.entity_id}:{account}:create"
        assert record.trace_id == "req_board_1"
        assert (record.attempts, record.reason, record.error_class) == (1, "forbidden", "Forbidden")
        assert "read-only" in record.last_error
        assert [h["attempt"] for h in record.error_history] == [1]
        assert record.status == "open" and record.failed_at >= record.first_failed_at
        assert parse_payload([record.payload]).job_id == receipt.job_ids[0]
        assert len(pipeline.provider.calls()) == 1  # no retry for a permanent error

        pipeline.provider.clear_faults()
        report = dlq.replay(pipeline.clients, [record])
        assert len(report.replayed) == 1 and not report.skipped
        pipeline.wait_target(receipt.entity_id, account, "synced")

    assert [c.effect for c in pipeline.provider.calls() if c.effect] == ["created"]
    [closed] = pipeline.dead_letters(status="replayed")
    assert closed.replay_job_id == report.replayed[0].job_id
    again = dlq.replay(pipeline.clients, [closed])
    assert not again.replayed and again.skipped[0].why == "record is replayed"


def test_exhausted_retries_are_dead_lettered_with_their_history(settings_factory: Any) -> None:
    pipeline = Pipeline(settings_factory(retry_schedule=(0.05, 0.05)))
    try:
        account = pipeline.account()
        pipeline.provider.add_fault(error="unavailable", message="503 from upstream")
        receipt = pipeline.submit([account])
        with pipeline.worker():
            pipeline.wait_target(receipt.entity_id, account, "failed")
            [record] = wait_until(pipeline.dead_letters, what="dead letter")
        assert (record.reason, record.error_class, record.attempts) == ("retries exhausted", "ProviderUnavailable", 3)
        assert [h["attempt"] for h in record.error_history] == [1, 2, 3]
        assert all(h["error_class"] == "ProviderUnavailable" for h in record.error_history)
        assert pipeline.outcomes() == {"retry_scheduled": 2, "dead_lettered": 1}
    finally:
        pipeline.close()


def test_a_corrupt_payload_is_dead_lettered_and_the_worker_keeps_going(pipeline: Pipeline) -> None:
    account = pipeline.account()
    queue = pipeline.settings.queue
    with pipeline.worker():
        pipeline.broker.enqueue(
            dramatiq.Message(
                queue_name=queue,
                actor_name="sync_calendar_event",
                args=({"job_id": "job_corrupt", "entity": "oops", "version": "seventeen"},),
                kwargs={},
                options={},
            )
        )
        [record] = wait_until(pipeline.dead_letters, what="corrupt payload in the DLQ")
        assert (record.reason, record.error_class) == ("invalid payload", "InvalidPayload")
        assert record.job_id == "job_corrupt"
        assert record.payload == {"job_id": "job_corrupt", "entity": "oops", "version": "seventeen"}
        assert "tenant_id" in record.last_error  # the error names the missing field

        receipt = pipeline.submit([account])
        pipeline.wait_target(receipt.entity_id, account, "synced")
    assert pipeline.outcomes() == {"dead_lettered": 1, "success": 1}


def test_an_unknown_actor_is_dead_lettered(pipeline: Pipeline) -> None:
    with pipeline.worker():
        pipeline.broker.enqueue(
            dramatiq.Message(
                queue_name=pipeline.settings.queue, actor_name="no_such_job", args=(), kwargs={}, options={}
            )
        )
        [record] = wait_until(pipeline.dead_letters, what="unknown actor in the DLQ")
    # Refused at the consumer, before any worker thread sees it (tests/integration/test_poison.py).
    assert (record.kind, record.reason, record.job_type) == ("quarantined", "quarantined: unknown actor", "no_such_job")


def test_revoked_credentials_mark_the_account_and_replay_waits_for_reauth(pipeline: Pipeline) -> None:
    account = pipeline.account()
    pipeline.provider.add_fault(error="auth", times=1, message="invalid_grant")
    first = pipeline.submit([account], title="one")
    with pipeline.worker():
        pipeline.wait_target(first.entity_id, account, "failed")
        second = pipeline.submit([account], title="two")
        pipeline.wait_target(second.entity_id, account, "failed")  # fails without calling the provider
        records = pipeline.dead_letters(account_id=account)
        assert {r.reason for r in records} == {"needs re-authorization"}
        assert len(pipeline.provider.calls()) == 1
        with pipeline.clients.db.read() as conn:
            summary = accounts.get_summary(conn, account)
        assert summary is not None and summary.status == "needs_reauth"

        refused = dlq.replay(pipeline.clients, records)
        assert not refused.replayed and all("re-authorize" in s.why for s in refused.skipped)

        with pipeline.clients.db.write() as conn:
            accounts.update_account(conn, account, status="active")
        report = dlq.replay(pipeline.clients, pipeline.dead_letters(account_id=account))
        assert len(report.replayed) == 2
        pipeline.wait_target(first.entity_id, account, "synced")
        pipeline.wait_target(second.entity_id, account, "synced")
    assert sorted(c.effect for c in pipeline.provider.calls() if c.effect) == ["created", "created"]


def test_removing_an_account_and_deleting_the_event_reach_the_provider(pipeline: Pipeline) -> None:
    a, b = pipeline.account(account_id="acc-a"), pipeline.account(account_id="acc-b")
    with pipeline.worker():
        receipt = pipeline.submit([a, b])
        pipeline.wait_idle()
        pipeline.submit([a], entity_id=receipt.entity_id, title="only a")
        pipeline.wait_target(receipt.entity_id, b, "deleted")
        pipeline.wait_target(receipt.entity_id, a, "synced")
        gone = pipeline.submit(None, entity_id=receipt.entity_id, operation="delete")
        assert gone.version == 3
        pipeline.wait_target(receipt.entity_id, a, "deleted")
        restored = pipeline.submit([a], entity_id=receipt.entity_id, title="back")
        pipeline.wait_target(receipt.entity_id, a, "synced")
    assert restored.version == 4
    [event_a] = pipeline.provider.events(a)
    [event_b] = pipeline.provider.events(b)
    assert (event_a.status, event_a.body["title"]) == ("confirmed", "back")
    assert event_b.status == "cancelled"
    assert [c.effect for c in pipeline.provider.calls() if c.account_id == a] == [
        "created", "updated", "deleted", "restored"]  # fmt: skip


def test_an_older_write_landing_after_a_newer_one_is_repaired(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Our lock expired while we were paused inside the provider call, and another worker synced v2 meanwhile."""
    account = pipeline.account()
    first = pipeline.submit([account], title="v1")
    real_upsert = pipeline.provider.upsert
    paused: list[int] = []

    def paused_call(acc: Any, event: Any, target: Any) -> Any:
        if not paused:
            paused.append(1)
            pipeline.submit(None, entity_id=first.entity_id, title="v2")
            with pipeline.clients.db.write() as tx:  # the other worker's v2 sync lands first
                targets.record_synced(
                    tx,
                    TargetKey("tenant-1", first.entity_id, account),
                    version=2,
                    external_id=external_id_for(target.sync_key),
                    etag=None,
                    final_status="synced",
                )
            real_upsert(acc, replace(event, title="v2", version=2), target)  # fmt: skip
        return real_upsert(acc, event, target)  # ...and then our v1 write reaches the provider

    monkeypatch.setattr(pipeline.provider, "upsert", paused_call)
    spy = EnqueueSpy(pipeline.broker, monkeypatch)

    def repairs() -> list[JobPayload]:  # a repair waiting for the lock is sent again: count each job once
        return list({s.payload.job_id: s.payload for s in spy.sent if s.message.options.get("repair")}.values())

    def repair_ran() -> bool:
        sent = repairs()
        with pipeline.clients.db.read() as conn:
            return len(sent) == 1 and idempotency.succeeded(conn, sent[0].idempotency_key)

    with pipeline.worker():
        wait_until(lambda: pipeline.outcomes().get("success", 0) >= 2, what="two successful syncs")
        assert repair_ran(), "no repair sync ran: the older write's loss of the compare-and-set went unnoticed"
        wait_until(lambda: pipeline.outcomes().get("stale") == 1, what="the submitted v2 job to find v2 synced")
    [repair] = repairs()
    assert (repair.target_version, repair.operation) == (2, "update")
    assert repair.idempotency_key.startswith(f"calendar:tenant-1:{first.entity_id}:{account}:create:repair:")
    [stored] = pipeline.provider.events(account)
    assert stored.body["title"] == "v2" and stored.body["version"] == 2
    assert _upsert_versions(pipeline) == [2, 1, 2]  # the last write is the repair's: the v2 job was skipped
    assert pipeline.outcomes()["success"] == 2  # the v1 job and its repair
    assert pipeline.target(first.entity_id, account).synced_version == 2

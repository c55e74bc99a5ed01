"""Sweeps under faults and concurrency: a read-back that fails makes no finding and is retried, a refusal is counted
and not dead-lettered, a repair waits for the target's lock, a sweep a later claim replaced is dropped, two workers
never both enqueue one account's sweep, and the workers' maintenance pass schedules sweeps the actor runs."""

from __future__ import annotations

import datetime as dt
import threading
from typing import Any

import pytest

from calsync.core.drift.schedule import enqueue_due
from calsync.core.drift.sweep import parse_sweep, run_sweep, sweep_message
from calsync.core.messaging.messages import SYNC_JOB
from calsync.core.model.errors import Held, ProviderUnavailable
from calsync.core.model.vocabulary import Outcome
from calsync.core.producer.reconcile import requeue_lost
from tests.drift.conftest import Drift
from tests.spies import EnqueueSpy
from tests.support import wait_until

pytestmark = pytest.mark.integration


def baseline(drift: Drift, *, title: str = "Planning") -> tuple[str, str, str]:
    """An account with one synced event, swept once (a cursor): the account, the event, its provider id."""
    account = drift.pipeline.account()
    event, external_id = drift.synced(account, title=title)
    assert drift.sweep(account).findings == []
    return account, event, external_id


def read_backs(drift: Drift) -> list[tuple[str | None, str | None]]:
    """The read-back calls the memory calendar saw: (effect, error)."""
    return [(c.effect, c.error) for c in drift.pipeline.provider.calls() if c.op == "read_back"]


def test_a_read_back_that_fails_records_nothing_and_keeps_the_cursor(drift: Drift) -> None:
    account, _, external_id = baseline(drift)
    cursor = drift.state(account).cursor  # type: ignore[union-attr]
    drift.pipeline.provider.user_delete(account, external_id)
    drift.pipeline.provider.add_fault(op="read_back", error="unavailable", times=1)
    with pytest.raises(ProviderUnavailable):
        drift.sweep(account)
    state = drift.state(account)
    assert state is not None and (state.cursor, state.failures) == (cursor, 1)
    assert drift.findings() == []
    [finding] = drift.sweep(account).findings  # the next one finds it, once
    assert finding.kind == "deleted_externally"
    assert drift.state(account).failures == 0  # type: ignore[union-attr]


@pytest.mark.both_brokers
def test_a_sweep_that_fails_is_retried_by_the_worker_and_reports_only_what_is_there(drift: Drift) -> None:
    account, _, external_id = baseline(drift)
    drift.pipeline.provider.user_edit(account, external_id, title="Mine")
    drift.pipeline.provider.add_fault(op="read_back", error="unavailable", times=2)
    drift.pipeline.broker.enqueue(sweep_message(drift.pipeline.settings.effective_drift_queue, account))
    with drift.pipeline.worker():
        wait_until(lambda: drift.findings(), what="the retried sweep's finding")
        wait_until(lambda: drift.pipeline.outcomes().get("success", 0) >= 2, what="the sweep to succeed")
    assert [(f.kind, f.action) for f in drift.findings()] == [("modified_externally", "reported")]
    assert read_backs(drift)[1:] == [(None, "ProviderUnavailable")] * 2 + [("changes", None)]
    assert drift.pipeline.outcomes().get(Outcome.RETRY_SCHEDULED, 0) == 2


def test_a_refused_read_back_is_counted_not_dead_lettered(drift: Drift) -> None:
    account, _, _ = baseline(drift)
    drift.pipeline.provider.add_fault(op="read_back", error="forbidden", times=1)
    result = drift.sweep(account)
    assert (result.skipped, result.findings) == ("failed", [])
    assert drift.state(account).failures == 1  # type: ignore[union-attr]
    assert drift.pipeline.dead_letters() == []


def test_a_repair_waits_for_the_target_s_lock_and_is_not_swallowed_by_idempotency(drift: Drift) -> None:
    account, event, external_id = baseline(drift)
    drift.policy("enforce")
    drift.pipeline.provider.user_delete(account, external_id)
    keys, locks = drift.pipeline.clients.keys, drift.pipeline.app.locks
    held = locks.acquire(keys.lock("tenant-1", event, account))
    assert held is not None
    [finding] = drift.sweep(account).findings
    assert finding.action == "repaired"
    with drift.pipeline.worker():
        wait_until(lambda: drift.pipeline.outcomes().get(Outcome.LOCK_BUSY, 0) >= 2, what="the repair to wait")
        assert [e.status for e in drift.pipeline.provider.events(account)] == ["cancelled"]
        locks.release(held)
        row = drift.pipeline.wait_target(event, account, "synced")
    assert [e.status for e in drift.pipeline.provider.events(account)] == ["confirmed"]
    assert row.external_id == external_id and drift.pipeline.outcomes().get(Outcome.ALREADY_DONE, 0) == 0


def test_a_sweep_replaced_by_a_later_claim_is_dropped(drift: Drift, monkeypatch: pytest.MonkeyPatch) -> None:
    account = drift.pipeline.account()
    drift.synced(account)
    spy, now = EnqueueSpy(drift.pipeline.broker, monkeypatch), dt.datetime.now(dt.UTC)
    for later in (0, 300):  # this interval's claim, then the next one's (the first sweep never ran)
        enqueue_due(drift.pipeline.clients.db, drift.pipeline.broker, drift.pipeline.settings.effective_drift_queue,
                    interval=300, reads_back=lambda name: True, now=now + dt.timedelta(seconds=later))  # fmt: skip
    first, second = (parse_sweep(s.message.args[0]) for s in spy.sent)
    assert run_sweep(drift.parts, first[0], claim=first[1]).skipped == "superseded"
    assert read_backs(drift) == []
    assert run_sweep(drift.parts, second[0], claim=second[1]).skipped is None
    assert read_backs(drift) == [("full", None)]


@pytest.mark.both_databases
def test_two_workers_never_both_enqueue_one_account_s_sweep(drift: Drift, monkeypatch: pytest.MonkeyPatch) -> None:
    accounts = [drift.pipeline.account(account_id=f"acc-{n:02}") for n in range(12)]
    spy = EnqueueSpy(drift.pipeline.broker, monkeypatch)
    start, now = threading.Barrier(2), dt.datetime.now(dt.UTC)

    def worker() -> None:
        start.wait()
        for _ in range(3):
            enqueue_due(drift.pipeline.clients.db, drift.pipeline.broker, drift.pipeline.settings.effective_drift_queue,
                        interval=300, reads_back=lambda name: True, now=now, limit=5)  # fmt: skip

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    swept = sorted(s.message.args[0]["account_id"] for s in spy.sent)
    assert swept == sorted(accounts)


def test_the_workers_maintenance_pass_schedules_sweeps_the_actor_runs(drift: Drift) -> None:
    account = drift.pipeline.account()
    off = drift.pipeline.account("quiet-tenant", account_id="off-acc")
    drift.policy("off", tenant="quiet-tenant")
    drift.synced(account)
    maintenance = drift.maintenance()
    with drift.pipeline.worker():
        maintenance.run_once()
        wait_until(lambda: drift.state(account) and drift.state(account).swept_at, what="the scheduled sweep")
    assert drift.state(off) is None  # off: never claimed, never swept
    assert read_backs(drift) == [("full", None)]
    maintenance.run_once()  # within the interval: nothing is due
    assert drift.pipeline.outcomes().get("success", 0) == 2  # the sync and the sweep


def test_a_sweep_held_by_an_open_breaker_is_deferred_not_counted_as_failed(drift_factory: Any) -> None:
    drift = drift_factory(breaker_failures="memory=1", breaker_open_seconds=60)
    account, _, _ = baseline(drift)
    drift.pipeline.provider.add_fault(op="read_back", error="unavailable", times=1)
    with pytest.raises(ProviderUnavailable):
        drift.sweep(account)  # the failure opens the account's breaker
    with pytest.raises(Held):
        drift.sweep(account)
    assert drift.state(account).failures == 1  # type: ignore[union-attr]
    assert read_backs(drift)[1:] == [(None, "ProviderUnavailable")]  # the held sweep sent nothing


def test_a_repair_whose_enqueue_failed_is_enqueued_as_a_repair_by_the_reconciler(
    drift: Drift, monkeypatch: pytest.MonkeyPatch
) -> None:
    account, event, external_id = baseline(drift)
    drift.policy("enforce")
    drift.pipeline.provider.user_delete(account, external_id)
    broker, real = drift.pipeline.broker, drift.pipeline.broker.enqueue

    def refuse_syncs(message: Any, **kw: Any) -> Any:
        if message.actor_name == SYNC_JOB:
            raise ConnectionError("the broker is down")
        return real(message, **kw)

    monkeypatch.setattr(broker, "enqueue", refuse_syncs)
    [finding] = drift.sweep(account).findings
    assert finding.action == "repaired"
    unqueued = drift.pipeline.target(event, account)
    assert (unqueued.status, unqueued.due_at, unqueued.wait_reason) == ("pending", None, "not enqueued")
    monkeypatch.setattr(broker, "enqueue", real)
    assert requeue_lost(drift.pipeline.clients).enqueued == 1
    with drift.pipeline.worker():
        drift.pipeline.wait_target(event, account, "synced")
    assert [e.status for e in drift.pipeline.provider.events(account)] == ["confirmed"]

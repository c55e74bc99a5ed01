"""The shipped alerts, proven in a real Prometheus scraping real calsync processes (issue 35).

Each scenario provokes an alert's real cause (a stopped process, a killed pod, a paused pipeline, a broken provider,
a failing webhook receiver, an account not swept for drift, a stopped exporter), waits for Prometheus to fire the
alert through /api/v1/alerts, removes the cause and waits for it to resolve. The rules are the shipped ones with a
test profile of thresholds, windows and ``for:`` (tests/monitoring/live.py). A quiet healthy run comes first, the
dashboard's queries and Alertmanager's routing after the scenarios: one test, so that one Prometheus and one worker
pod serve it all (pytest-xdist hands separate tests to separate processes, each its own stack).
"""

from __future__ import annotations

import datetime as dt
import itertools
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from sqlalchemy import select, update

from calsync.core.drift import store as drift_store
from calsync.core.drift.schedule import enqueue_due
from calsync.core.store.schema import event_targets, provider_accounts
from calsync.core.webhooks.endpoints import Endpoints
from calsync.core.worker.metrics import calsync_version
from k8s.monitoring.check import panel_problems, rule_problems
from k8s.monitoring.source.alerts import alerts
from tests.monitoring.artefacts import RUNBOOK
from tests.monitoring.live import LIVE_PARAMS, NAMESPACE, WORKER_POD, Alertmanager, Notifications
from tests.monitoring.stack import STACK_SETTINGS, Stack, running_stack
from tests.support import closed_port, utcnow, wait_until
from tests.webhooks.receiver import Receiver, serve

pytestmark = [pytest.mark.integration, pytest.mark.slow]
T = TypeVar("T")


def _quiet(stack: Stack, account: str, seconds: float) -> None:
    """A healthy load for ``seconds``: a change every 0.2 s, all synced; no alert may even be pending."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        stack.submit(1, account)
        assert stack.prom.alerts() == [], stack.prom.alerts()
        time.sleep(0.2)
    stack.pipeline.wait_idle(timeout=30)
    assert stack.prom.alerts() == []


def _submitting(stack: Stack, accounts: list[str], done: Callable[[], T], *, timeout: float = 90) -> T:
    """Submit a change every 0.25 s, for each account in turn, until ``done()`` returns something truthy."""
    deadline = time.monotonic() + timeout
    turns = itertools.cycle(accounts)
    while not (found := done()):
        assert time.monotonic() < deadline, "timed out"
        stack.submit(1, next(turns))
        time.sleep(0.25)
    return found


def heartbeat_lost_by_one_stuck_process(stack: Stack, account: str) -> None:
    """One worker process stuck (SIGSTOP): its heartbeat series freezes while its sibling goes on."""
    prom = stack.prom
    stuck = stack.worker_pids()[0]
    os.kill(stuck, signal.SIGSTOP)
    try:
        [labels] = prom.wait_firing("CalsyncWorkerHeartbeatStale")
        assert labels["worker"].endswith(f":{stuck}") and labels["pod"] == WORKER_POD
    finally:
        os.kill(stuck, signal.SIGCONT)
    prom.wait_resolved("CalsyncWorkerHeartbeatStale")


def queue_backlog_while_paused(stack: Stack, account: str) -> None:
    """Submits go on with the pipeline paused: the backlog rises and its oldest message ages."""
    prom = stack.prom
    stack.pause()
    try:
        both = {"CalsyncQueueBacklogRising", "CalsyncOldestMessageTooOld"}
        _submitting(stack, [account], lambda: both <= prom.firing().keys())
        for name in both:
            assert [labels["queue"] for labels in prom.wait_firing(name)] == [stack.settings.queue]
        assert "CalsyncNoActiveWorkers" not in prom.firing()  # paused workers still beat
    finally:
        stack.switch.resume()
    prom.wait_resolved("CalsyncQueueBacklogRising", "CalsyncOldestMessageTooOld")
    stack.pipeline.wait_idle(timeout=60)


def dead_letter_burst(stack: Stack, account: str) -> None:
    """An account's calls refused for good with 15 jobs queued: they dead-letter within a scrape or two, and only
    the series exported at 0 from the worker's boot lets increase() see the burst."""
    prom = stack.prom
    stack.provider.add_fault(op="upsert", error="forbidden", account_id=account)
    stack.pause()
    stack.submit(15, account)
    stack.switch.resume()
    try:
        [labels] = prom.wait_firing("CalsyncDeadLettersGrowingFast")
        assert (labels["job_type"], labels["reason"]) == ("sync_calendar_event", "forbidden")
        [labels] = prom.wait_firing("CalsyncSuccessRatioDropped")
        assert (labels["job_type"], labels["provider"]) == ("sync_calendar_event", "memory")
    finally:
        stack.provider.clear_faults()
    prom.wait_resolved("CalsyncDeadLettersGrowingFast", "CalsyncSuccessRatioDropped")


def retries_after_a_deploy(stack: Stack, account: str) -> None:
    """Every job's first call fails (provider unavailable) on a version Prometheus never saw before."""
    prom = stack.prom
    stack.provider.add_fault(op="upsert", error="unavailable", account_id=account, times=15)
    stack.submit(15, account)
    try:
        [labels] = prom.wait_firing("CalsyncRetrySpikeAfterDeploy")
        assert labels["version"] == calsync_version()
    finally:
        stack.provider.clear_faults()
    stack.pipeline.wait_idle(timeout=60)
    prom.wait_resolved("CalsyncRetrySpikeAfterDeploy", "CalsyncSuccessRatioDropped")


def pod_gone(stack: Stack, account: str) -> None:
    """The worker's whole process group SIGKILLed with work queued: its series vanish (no heartbeat alert can
    fire), its target stays down and no worker is active. A new worker (with circuit breakers) ends it."""
    prom = stack.prom
    stack.kill_worker_pod()
    stack.submit(3, account)
    [labels] = prom.wait_firing("CalsyncWorkerDown")
    assert labels["pod"] == WORKER_POD
    prom.wait_firing("CalsyncNoActiveWorkers")
    assert "CalsyncWorkerHeartbeatStale" not in {a["labels"]["alertname"] for a in prom.alerts()}
    stack.start_worker(stack.settings)
    prom.wait_resolved("CalsyncWorkerDown", "CalsyncNoActiveWorkers")
    stack.pipeline.wait_idle(timeout=60)


def circuit_open(stack: Stack, account: str) -> None:
    """The provider fails every call of three accounts (the provider's breaker opens only on failures of
    BREAKER_FAILURES distinct accounts): it opens, and every probe fails until the provider is back."""
    prom = stack.prom
    stack.provider.add_fault(op="upsert", error="unavailable")
    accounts = [account, *(stack.pipeline.account(account_id=f"circuit-{n}") for n in range(3))]
    try:
        _submitting(stack, accounts, lambda: prom.firing().get("CalsyncProviderCircuitOpen"))
        [labels] = prom.wait_firing("CalsyncProviderCircuitOpen")
        assert labels["provider"] == "memory"
    finally:
        stack.provider.clear_faults()
    prom.wait_resolved("CalsyncProviderCircuitOpen")
    stack.pipeline.wait_idle(timeout=60)


def target_overdue(stack: Stack, account: str) -> None:
    """A pending target back-dated by an hour (its job lost, as far as anyone can tell) until it is synced."""
    prom = stack.prom
    stack.pause()
    try:
        [entity] = stack.submit(1, account)
        with stack.pipeline.clients.db.write() as conn:
            conn.execute(
                update(event_targets)
                .where(event_targets.c.event_id == entity)
                .values(due_at=utcnow() - dt.timedelta(hours=1))
            )
        prom.wait_firing("CalsyncSyncTargetsOverdue")
    finally:
        stack.switch.resume()
    stack.pipeline.wait_target(entity, account, "synced", timeout=60)
    prom.wait_resolved("CalsyncSyncTargetsOverdue")


def webhook_endpoint_disabled(stack: Stack, account: str) -> None:
    """A tenant's receiver answers 503: after two failed attempts in a row its breaker disables the endpoint."""
    prom, pipeline = stack.prom, stack.pipeline
    endpoints = Endpoints.from_settings(pipeline.clients.db, pipeline.clients.cipher, stack.settings)
    for receiver in serve(Receiver(answer=lambda n: 503)):
        _, endpoint = endpoints.add("tenant-hooks", receiver.url, ["sync.succeeded"])
        pipeline.submit([pipeline.account("tenant-hooks")], tenant="tenant-hooks")
        prom.wait_firing("CalsyncWebhookEndpointDisabled")
        endpoints.enable(endpoint.id)
        prom.wait_resolved("CalsyncWebhookEndpointDisabled")
        endpoints.remove(endpoint.id)


def drift_verification_behind(stack: Stack, account: str) -> None:
    """An account last swept an hour ago and due since (the stack runs no housekeeping, so nothing claims its sweep)
    until the scheduler's own pass claims the due sweeps (every account's: none was swept before) and the worker's
    sweeps read their calendars back."""
    prom, pipeline = stack.prom, stack.pipeline
    with pipeline.clients.db.write() as conn:
        drift_store.record_sweep(conn, account, cursor=None, now=utcnow() - dt.timedelta(hours=1))
    [labels] = prom.wait_firing("CalsyncDriftVerificationBehind")
    assert labels["namespace"] == NAMESPACE
    settings = stack.settings
    queue, interval = settings.effective_drift_queue, settings.drift_interval
    memory_only = {"memory"}.__contains__
    assert enqueue_due(pipeline.clients.db, pipeline.broker, queue, interval=interval, reads_back=memory_only) >= 1
    prom.wait_resolved("CalsyncDriftVerificationBehind")
    with pipeline.clients.db.write() as conn:  # no account ages any more: no housekeeping sweeps them in this stack
        for tenant in conn.execute(select(provider_accounts.c.tenant_id).distinct()).scalars():
            drift_store.set_policy(conn, tenant, "off", now=utcnow())


def exporter_down(stack: Stack, account: str) -> None:
    """The exporter stopped, then started unable to read Redis, then started again as it should."""
    prom = stack.prom
    stack.stop_exporter()
    prom.wait_firing("CalsyncExporterDown")
    stack.start_exporter(stack.settings.model_copy(update={"redis_url": f"redis://127.0.0.1:{closed_port()}/0"}))
    [labels] = prom.wait_firing("CalsyncExporterSourceDown")
    assert labels["source"] == "redis"
    stack.stop_exporter()
    stack.start_exporter()
    prom.wait_resolved("CalsyncExporterDown", "CalsyncExporterSourceDown")


SCENARIOS = [
    heartbeat_lost_by_one_stuck_process, queue_backlog_while_paused, dead_letter_burst, retries_after_a_deploy,
    pod_gone, circuit_open, target_overdue, webhook_endpoint_disabled, drift_verification_behind, exporter_down,
]  # fmt: skip


def every_panel_has_data(stack: Stack) -> None:
    """k8s.monitoring.check's checks, as an operator runs them against their own Prometheus: every alert loaded and
    evaluating, every dashboard query (variables substituted) answering with series."""
    assert rule_problems(stack.prom.url) == []
    assert panel_problems(stack.prom.url) == []


def alerts_reach_their_receivers(stack: Stack, notifications: Notifications) -> None:
    """Alertmanager, running the shipped example route, delivers a critical alert (the exporter stopped) to the
    pager and a warning (a stuck worker process) to the team channel, then their resolution; every notification
    carries the labels and the runbook_url that docs/RUNBOOK.md's sections are keyed by."""
    severity = {alert.name: alert.severity for alert in alerts(LIVE_PARAMS)}
    receiver_of = {"critical": "pager", "warning": "team"}

    def notified(receiver: str, status: str) -> set[str]:
        return {a["labels"]["alertname"] for a in notifications.alerts(receiver) if a["status"] == status}

    def both(status: str) -> bool:  # the critical alert at the pager, the warning in the team channel
        critical, warning = notified("pager", status), notified("team", status)
        return "CalsyncExporterDown" in critical and "CalsyncWorkerHeartbeatStale" in warning

    stuck = stack.worker_pids()[0]
    stack.stop_exporter()
    os.kill(stuck, signal.SIGSTOP)
    try:
        wait_until(
            lambda: both("firing"), timeout=60, what="a critical alert at the pager and a warning in the team channel"
        )
    finally:
        os.kill(stuck, signal.SIGCONT)
        stack.start_exporter()
    wait_until(lambda: both("resolved"), timeout=60, what="their resolution")
    runbook = RUNBOOK.read_text()
    for receiver in receiver_of.values():
        for alert in notifications.alerts(receiver):
            name = alert["labels"]["alertname"]
            assert receiver_of[severity[name]] == receiver, (name, receiver)
            assert alert["annotations"]["runbook_url"] == f"docs/RUNBOOK.md#{name.lower()}"
            assert f"\n## {name}\n" in runbook
            assert alert["labels"].get("namespace", NAMESPACE) == NAMESPACE
    print("notified during the scenarios:", {r: sorted(notified(r, "firing")) for r in receiver_of.values()})


def test_no_alert_in_a_quiet_run_and_every_alert_fires_in_its_scenario_and_resolves_after(
    settings_factory: Any, tmp_path: Path
) -> None:
    settings = settings_factory(**STACK_SETTINGS, breaker_failures={"memory": 3}, breaker_open_seconds=1)
    worker_settings = settings.model_copy(update={"breaker_failures": {}})  # retries, not deferrals, at first
    notifications = Notifications()
    alertmanager = Alertmanager(tmp_path / "alertmanager", notifications)
    try:
        with running_stack(
            settings, tmp_path, worker_settings=worker_settings, alertmanager=alertmanager.address
        ) as stack:
            account = stack.pipeline.account()
            _quiet(stack, account, 15)  # first a quiet healthy run: no alert, not even pending
            for scenario in SCENARIOS:
                print(f"{time.strftime('%H:%M:%S')} {scenario.__name__}")
                scenario(stack, account)
                # What a scenario set off resolves too (a failing webhook receiver's retries are retries as well).
                wait_until(
                    lambda: stack.prom.alerts() == [], timeout=60, what=f"every alert to resolve after {scenario}"
                )
            assert {alert.name for alert in alerts(LIVE_PARAMS)} <= stack.prom.fired, "an alert has no scenario"
            every_panel_has_data(stack)
            alerts_reach_their_receivers(stack, notifications)
    finally:
        alertmanager.stop()
        notifications.close()

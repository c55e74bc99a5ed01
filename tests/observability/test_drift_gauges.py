"""Drift on /metrics: the exporter's sweep age and overdue sweeps from the database, and the counters a sweep
increments (findings by provider and kind, the repaired ones)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client import REGISTRY, generate_latest
from sqlalchemy import update

from calsync.core.drift import store
from calsync.core.drift.metrics import count_finding
from calsync.core.drift.settings import DEFAULT_DRIFT_INTERVAL
from calsync.core.observability.exporter import exporter_registry
from calsync.core.observability.pipeline_state import StateReader
from calsync.core.store.schema import drift_state
from tests.observability.conftest import parse
from tests.support import Pipeline, utcnow

AGE, OVERDUE = "calsync_drift_sweep_age_seconds", "calsync_drift_sweeps_overdue"


def _swept(pipeline: Pipeline, account: str, *, ago: float, due_ago: float) -> None:
    """The account last swept ``ago`` seconds ago, its next sweep due ``due_ago`` seconds ago."""
    now = utcnow()
    with pipeline.clients.db.write() as conn:
        store.record_sweep(conn, account, cursor="c", now=now - dt.timedelta(seconds=ago))
        late = now - dt.timedelta(seconds=due_ago)
        conn.execute(update(drift_state).where(drift_state.c.account_id == account).values(next_sweep_at=late))


def _gauges(pipeline: Pipeline) -> tuple[float, float]:
    page = parse(generate_latest(exporter_registry(StateReader(pipeline.clients))).decode())
    return page.samples[(AGE, frozenset())], page.samples[(OVERDUE, frozenset())]


@pytest.fixture
def swept(settings_factory: Any) -> Iterator[Pipeline]:
    """A pipeline whose sweeps are on (the suite's default interval is 0: no sweeps); nothing schedules one here."""
    pipeline = Pipeline(settings_factory(drift_interval=DEFAULT_DRIFT_INTERVAL))
    yield pipeline
    pipeline.close()


@pytest.mark.both_databases
def test_the_sweep_age_is_the_least_recent_sweeps_and_overdue_counts_sweeps_late_by_an_interval(
    swept: Pipeline,
) -> None:
    pipeline, interval = swept, swept.settings.drift_interval
    assert _gauges(pipeline) == (0, 0)  # nothing swept yet: no age, nothing overdue
    old, recent, ignored = pipeline.account(account_id="a-old"), pipeline.account(account_id="a-new"), "a-off"
    pipeline.account(tenant="tenant-off", account_id=ignored)
    _swept(pipeline, old, ago=interval * 3, due_ago=interval * 2)  # overdue: due for more than an interval
    _swept(pipeline, recent, ago=10, due_ago=interval / 2)  # due, but within its interval: not overdue yet
    _swept(pipeline, ignored, ago=interval * 100, due_ago=interval * 99)
    with pipeline.clients.db.write() as conn:  # a tenant that turned drift off owes no sweep: it ages nothing
        store.set_policy(conn, "tenant-off", "off", now=utcnow())
    age, overdue = _gauges(pipeline)
    assert interval * 3 <= age < interval * 3 + 30
    assert overdue == 1
    drift = StateReader(pipeline.clients).read().as_json()["drift"]
    assert drift["sweeps_overdue"] == 1 and drift["sweep_age_seconds"] == round(drift["sweep_age_seconds"], 3)


def test_with_sweeps_off_nothing_is_behind_however_old_the_last_sweep(pipeline: Pipeline) -> None:
    assert pipeline.settings.drift_interval == 0  # CALSYNC_DRIFT_INTERVAL=0: workers schedule no sweep
    _swept(pipeline, pipeline.account(), ago=86400, due_ago=86400)
    assert _gauges(pipeline) == (0, 0)


def test_a_finding_counts_as_detected_and_as_repaired_only_when_repaired() -> None:
    def value(name: str) -> float:
        return REGISTRY.get_sample_value(name, {"provider": "graph", "kind": "missing"}) or 0.0

    before = value("calsync_drift_detected_total"), value("calsync_drift_repaired_total")
    count_finding("graph", "missing", repaired=False)
    count_finding("graph", "missing", repaired=True)
    assert (value("calsync_drift_detected_total"), value("calsync_drift_repaired_total")) == (
        before[0] + 2, before[1] + 1)  # fmt: skip

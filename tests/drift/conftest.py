"""Fixtures of the drift tests: a pipeline (real broker, database and worker threads, the memory provider) whose
webhooks reach a loopback receiver, with shortcuts to sweep an account and read what a sweep recorded."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from calsync.core.drift import store
from calsync.core.drift.store import Finding, SweepState
from calsync.core.drift.sweep import SweepParts, SweepResult, run_sweep
from calsync.core.model.drift import DriftPolicy
from calsync.core.traffic import TrafficGate, TrafficStore, provider_limits
from calsync.core.webhooks import Outbox
from calsync.core.worker.maintenance import Maintenance
from tests.drift.support import NOW
from tests.support import Pipeline

# The webhook tests' fixtures, imported to be found here: drift_factory builds on hooks_factory; receiver.
from tests.webhooks.conftest import Hooks, hooks_factory, receiver  # noqa: F401


class Drift(Hooks):
    """A webhook pipeline, plus the sweep of one account as the ``sweep_account`` actor runs it."""

    def __init__(self, pipeline: Pipeline) -> None:
        super().__init__(pipeline)
        rt, settings = pipeline.clients, pipeline.settings
        self.outbox = Outbox(rt.db, settings.webhook_queue, ttl=0)  # subscriptions read at every sweep
        traffic = TrafficGate(TrafficStore(rt.redis, rt.keys), provider_limits(settings, lease=settings.job_time_limit))
        self.parts = SweepParts(rt.db, rt.cipher, pipeline.app.providers, pipeline.broker, settings.queue,
                                traffic=traffic, outbox=self.outbox)  # fmt: skip

    def policy(self, policy: DriftPolicy, tenant: str = "tenant-1") -> None:
        """Set the tenant's policy."""
        with self.pipeline.clients.db.write() as conn:
            store.set_policy(conn, tenant, policy, now=NOW)

    def sweep(self, account_id: str) -> SweepResult:
        """One sweep of the account, in this thread (repairs and notifications go to the broker)."""
        result = run_sweep(self.parts, account_id)
        self.outbox.flush()
        return result

    def synced(self, account_id: str, **change: Any) -> tuple[str, str]:
        """An event submitted to the account and synced by the workers: its id and its provider id."""
        receipt = self.pipeline.submit([account_id], **change)
        with self.pipeline.worker():
            row = self.pipeline.wait_target(receipt.entity_id, account_id, "synced")
        assert row.external_id is not None
        return receipt.entity_id, row.external_id

    def maintenance(self) -> Maintenance:
        """The workers' maintenance pass (run it with ``run_once``)."""
        [found] = [m for m in self.pipeline.broker.middleware if isinstance(m, Maintenance)]
        return found

    def findings(self) -> list[Finding]:
        """Every finding recorded, oldest first."""
        with self.pipeline.clients.db.read() as conn:
            return store.list_findings(conn, tenant_id=None, kind=None, after_id=None, limit=1000)

    def state(self, account_id: str) -> SweepState | None:
        """The account's sweep state."""
        with self.pipeline.clients.db.read() as conn:
            return store.sweep_state(conn, account_id)


@pytest.fixture
def drift_factory(hooks_factory: Callable[..., Hooks]) -> Callable[..., Drift]:  # noqa: F811
    """Builds a drift pipeline (setting overrides as keyword arguments): sweeps scheduled every 5 minutes by a
    maintenance pass that never comes by itself during a test (a test runs it: Drift.maintenance)."""

    def build(**overrides: Any) -> Drift:
        return Drift(hooks_factory(**{"drift_interval": 300, "maintenance_interval": 3600, **overrides}).pipeline)

    return build


@pytest.fixture
def drift(drift_factory: Callable[..., Drift]) -> Drift:
    """A drift pipeline with the test settings."""
    return drift_factory()

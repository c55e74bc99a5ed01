"""The create marker through real worker threads: committed before the provider call, once per target, only
for an adapter that asks for it (EWS), and not while traffic control holds the job."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from calsync.core.model.calendar import Account, EventState, ExternalRef, Target, needs_create_marker
from calsync.core.store import targets
from calsync.core.store.database import Database
from calsync.core.store.targets import TargetKey
from calsync.core.traffic import Limits, TrafficStore
from calsync.providers.exchange.provider import ExchangeProvider
from calsync.providers.google.provider import GoogleProvider
from calsync.providers.graph.provider import GraphProvider
from calsync.providers.memory import MemoryProvider
from tests.support import Pipeline, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.both_databases]


class LookupNeedingProvider(MemoryProvider):
    """The memory provider posing as an adapter without an idempotent create: each upsert notes what its target
    said and what the database said at that moment."""

    needs_create_marker = True

    def __init__(self) -> None:
        super().__init__()
        self.db: Database | None = None
        self.seen: list[tuple[bool, bool | None]] = []  # (the target's create_attempted, the stored one)

    def upsert(self, account: Account, event: EventState, target: Target) -> ExternalRef:
        assert self.db is not None
        with self.db.read() as conn:  # another connection: it sees only what was committed
            row = targets.get_target(conn, TargetKey(target.tenant_id, target.event_id, target.account_id))
        self.seen.append((target.create_attempted, row.create_attempted if row else None))
        return super().upsert(account, event, target)


@pytest.fixture
def marks() -> Iterator[list[TargetKey]]:
    """The targets the worker wrote the marker for, one entry per write."""
    written: list[TargetKey] = []
    real = targets.mark_create_attempted

    def counting(tx: Any, key: TargetKey) -> None:
        written.append(key)
        real(tx, key)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(targets, "mark_create_attempted", counting)
        yield written


def _pipeline(settings: Any) -> tuple[Pipeline, LookupNeedingProvider]:
    provider = LookupNeedingProvider()
    pipeline = Pipeline(settings, provider=provider)
    provider.db = pipeline.clients.db
    return pipeline, provider


@pytest.fixture
def needing(settings_factory: Any) -> Iterator[tuple[Pipeline, LookupNeedingProvider]]:
    """A pipeline whose memory accounts are served by the lookup-needing provider."""
    pipeline, provider = _pipeline(settings_factory())
    yield pipeline, provider
    pipeline.close()


def test_the_marker_is_committed_before_the_provider_call(
    needing: tuple[Pipeline, LookupNeedingProvider], marks: list[TargetKey]
) -> None:
    pipeline, provider = needing
    account = pipeline.account()
    receipt = pipeline.submit([account])
    with pipeline.worker():
        pipeline.wait_target(receipt.entity_id, account, "synced")
    # The adapter is told no create was sent before (it may skip its lookup); the database already says one may be.
    assert provider.seen == [(False, True)]
    assert pipeline.target(receipt.entity_id, account).create_attempted is True
    assert len(marks) == 1


def test_a_retry_after_a_lost_response_is_told_a_create_may_have_been_sent(
    needing: tuple[Pipeline, LookupNeedingProvider], marks: list[TargetKey]
) -> None:
    pipeline, provider = needing
    account = pipeline.account()
    provider.add_fault(op="upsert", error="timeout", after=True, times=1)  # created, the answer lost
    receipt = pipeline.submit([account])
    with pipeline.worker():
        pipeline.wait_target(receipt.entity_id, account, "synced")
        edit = pipeline.submit(None, entity_id=receipt.entity_id, title="Planning v2")
        wait_until(lambda: pipeline.target(receipt.entity_id, account).synced_version == edit.version,
                   what="the update")  # fmt: skip
    assert provider.seen == [(False, True), (True, True), (True, True)]  # create, its retry, the update
    assert [call.effect for call in provider.calls() if call.effect] == ["created", "adopted", "updated"]
    assert len(provider.events(account)) == 1
    assert len(marks) == 1  # once per target: the retry and the update write nothing


def test_a_create_after_a_dead_owner_s_lock_is_told_one_may_have_been_sent(
    needing: tuple[Pipeline, LookupNeedingProvider], marks: list[TargetKey]
) -> None:
    # A worker that died mid-job (say a previous release's, which writes no marker) may have sent a create and left
    # no trace in the database; taking its lock over is the trace.
    pipeline, provider = needing
    account = pipeline.account()
    receipt = pipeline.submit([account], entity_id="evt-taken-over")
    rt = pipeline.clients
    dead_owner = rt.keys.worker_heartbeat("dead-worker")
    rt.redis.set(rt.keys.lock("tenant-1", receipt.entity_id, account), f"{dead_owner}|lost", px=60_000)
    with pipeline.worker():
        pipeline.wait_target(receipt.entity_id, account, "synced")
    assert provider.seen == [(True, True)]
    assert len(marks) == 1  # the stored marker is still written before the call


def test_a_held_create_writes_no_marker_before_it_is_admitted(settings_factory: Any, marks: list[TargetKey]) -> None:
    pipeline, provider = _pipeline(settings_factory(account_concurrency="memory=2", traffic_retry_delay=0.05))
    try:
        account = pipeline.account()
        traffic, limits = TrafficStore(pipeline.clients.redis, pipeline.clients.keys), Limits(concurrency=2)
        call = traffic.admit("memory", account, "tenant-1", limits, 2)
        traffic.settle("memory", account, call, limits, "neutral", ("account", 1.0))  # a back-off another job saw
        receipt = pipeline.submit([account])
        with pipeline.worker():
            wait_until(lambda: pipeline.outcomes().get("deferred", 0) >= 1, what="the job to be held")
            assert pipeline.target(receipt.entity_id, account).create_attempted is False
            pipeline.wait_target(receipt.entity_id, account, "synced")
        assert provider.seen == [(False, True)] and len(marks) == 1
    finally:
        pipeline.close()


def test_an_adapter_with_its_own_idempotent_create_pays_no_marker_write(
    pipeline: Pipeline, marks: list[TargetKey]
) -> None:
    account = pipeline.account()
    receipt = pipeline.submit([account])
    with pipeline.worker():
        pipeline.wait_target(receipt.entity_id, account, "synced")
    assert marks == []
    assert pipeline.target(receipt.entity_id, account).create_attempted is False


@pytest.mark.parametrize(
    ("adapter", "needs"),
    [(ExchangeProvider, True), (GoogleProvider, False), (GraphProvider, False), (MemoryProvider, False)],
)
def test_only_the_exchange_adapter_asks_for_the_marker(adapter: Any, needs: bool) -> None:
    assert needs_create_marker(adapter) is needs

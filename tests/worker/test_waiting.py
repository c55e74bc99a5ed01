"""Why a target waits, from its row (what `calsync events show` and GET /v1/events/{id} show): held by what, until
when, and the provider's last error; and a job deferred again and again logs one info line, not one per deferral."""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

import pytest

from calsync.core.model.errors import (
    CircuitOpen,
    ConcurrencyLimited,
    Deferred,
    OutageSuspected,
    ProviderUnavailable,
)
from calsync.core.model.payload import new_payload
from calsync.core.model.vocabulary import WAIT_REASONS
from calsync.core.store.targets import TargetRow
from calsync.core.worker.delivery import Delivery
from tests.spies import redelivered
from tests.support import Pipeline, utcnow, wait_until

pytestmark = pytest.mark.integration


def _waiting(pipeline: Pipeline, entity: str, account: str, *reasons: str) -> TargetRow | None:
    row = pipeline.target(entity, account)
    return row if row.waiting in reasons and row.last_error else None


def _held_with_error(pipeline: Pipeline, entity: str, accounts: list[str]) -> TargetRow | None:
    # A job whose calls all found the breaker open has no provider error of its own: one of the failing ones has.
    held = (_waiting(pipeline, entity, account, "outage suspected", "circuit open") for account in accounts)
    return next(filter(None, held), None)


def test_a_target_held_in_an_outage_says_why_until_when_and_the_providers_error(settings_factory: Any) -> None:
    # A breaker after 2 failures that stays open: held jobs stay held while the test looks.
    governed = Pipeline(settings_factory(account_concurrency="memory=2", breaker_failures="memory=2",
                                         breaker_open_seconds=60, traffic_retry_delay=0.05))  # fmt: skip
    try:
        accounts = [governed.account(account_id=f"acc{n}") for n in range(3)]
        governed.provider.add_fault(error="unavailable", message="503 from the calendar backend")
        receipt = governed.submit(accounts)
        with governed.worker():
            row = wait_until(lambda: _held_with_error(governed, receipt.entity_id, accounts),
                             what="a target held, with the provider's error")  # fmt: skip
    finally:
        governed.close()
    assert "503 from the calendar backend" in (row.last_error or "") and row.error_class == "ProviderUnavailable"
    assert row.status == "pending" and row.due_at is not None and row.due_at > row.updated_at - dt.timedelta(seconds=1)
    shown = row.as_json()
    assert (shown["wait_reason"], shown["last_error"]) == (row.waiting, row.last_error)


def test_a_target_waiting_for_its_retry_says_retry_until_its_due_time(settings_factory: Any) -> None:
    pipeline = Pipeline(settings_factory(retry_schedule=(30,)))
    try:
        account = pipeline.account()
        pipeline.provider.add_fault(error="unavailable", message="backend down")
        receipt = pipeline.submit([account])
        with pipeline.worker():
            row = wait_until(lambda: _waiting(pipeline, receipt.entity_id, account, "retry"), what="the retry noted")
        assert "backend down" in (row.last_error or "") and row.due_at is not None
        assert row.due_at > utcnow() + dt.timedelta(seconds=20)  # the retry's due time: 30 s ± jitter
    finally:
        pipeline.close()


def test_a_target_behind_a_busy_lock_says_so_and_forgets_it_once_synced(pipeline: Pipeline) -> None:
    rt = pipeline.clients
    account = pipeline.account()
    receipt = pipeline.submit([account])
    held = pipeline.app.locks.acquire(rt.keys.lock("tenant-1", receipt.entity_id, account))
    with pipeline.worker():
        row = wait_until(lambda: pipeline.target(receipt.entity_id, account).waiting == "lock busy" or None,
                         what="the target to say it waits for the lock")  # fmt: skip
        assert held is not None and pipeline.app.locks.release(held)
        synced = pipeline.wait_target(receipt.entity_id, account, "synced")
    assert synced.waiting is None and synced.wait_reason is None and synced.as_json()["wait_reason"] is None
    assert row is not None


# --- the rule, one deferral at a time ------------------------------------------------------------------------------


def _deliveries(pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch, errors: list[Deferred]) -> list[Delivery]:
    """Each error raised by one delivery of the same job in turn."""
    account = pipeline.account()
    receipt = pipeline.submit([account])
    settings = pipeline.settings.model_copy(update={"reconcile_after": 600.0})  # a held job noted again after 300 s
    payload = new_payload(tenant_id="tenant-1", entity_id=receipt.entity_id, account_id=account, operation="create",
                          version=1, trace_id="waits")  # fmt: skip
    return redelivered(pipeline.clients.db, settings, monkeypatch, payload, errors)[0]


def _excused(message: str) -> OutageSuspected:
    try:
        try:
            raise ProviderUnavailable(message)
        except ProviderUnavailable as exc:
            raise OutageSuspected("memory account a: first_failure", retry_after=1) from exc
    except OutageSuspected as held:
        return held


def test_a_job_held_again_and_again_is_told_once_per_reason_and_for_each_provider_error(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    circuit, slots = CircuitOpen("provider_circuit", retry_after=5), ConcurrencyLimited("concurrency", retry_after=1)
    held = [circuit, circuit, slots, slots, _excused("503 at the backend"), _excused("503 again"), circuit, circuit]
    deliveries = _deliveries(pipeline, monkeypatch, held)
    assert [delivery.quiet for delivery in deliveries] == [False, True, False, True, False, False, False, True]
    assert [delivery.result["wait_reason"] for delivery in deliveries] == [
        "circuit open", "circuit open", "concurrency limited", "concurrency limited", "outage suspected",
        "outage suspected", "circuit open", "circuit open"]  # fmt: skip
    errors = [type(delivery.error).__name__ for delivery in deliveries]
    assert errors == ["NoneType"] * 4 + ["ProviderUnavailable"] * 2 + ["NoneType"] * 2
    assert deliveries[0].payload is not None
    row = pipeline.target(deliveries[0].payload.entity_id, deliveries[0].payload.account_id)
    # what holds it now, and the provider's last error, kept while holds without a provider call go on
    assert (row.waiting, row.error_class, row.last_error) == ("circuit open", "ProviderUnavailable", "503 again")


def test_only_the_first_wait_for_a_lock_is_told(pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch) -> None:
    from calsync.core.model.errors import TargetLocked

    deliveries = _deliveries(pipeline, monkeypatch, [TargetLocked("busy") for _ in range(3)])
    assert [delivery.quiet for delivery in deliveries] == [False, True, True]
    assert deliveries[0].payload is not None
    row = pipeline.target(deliveries[0].payload.entity_id, deliveries[0].payload.account_id)
    assert (row.waiting, row.last_error) == ("lock busy", None)


def test_a_job_held_again_and_again_writes_one_info_line(
    settings_factory: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="calsync.jobs")
    pipeline = Pipeline(settings_factory(account_concurrency="memory=1", traffic_retry_delay=0.05))
    try:
        account = pipeline.account()
        pipeline.provider.add_fault(error=None, delay_ms=1500, times=1)  # the first call keeps the one slot a while
        receipts = [pipeline.submit([account], title=f"event {n}") for n in range(3)]
        with pipeline.worker():
            wait_until(lambda: pipeline.outcomes().get("deferred", 0) >= 10, what="jobs held again and again")
            for receipt in receipts:
                pipeline.wait_target(receipt.entity_id, account, "synced")
    finally:
        pipeline.close()
    lines = [
        r for r in caplog.records if r.name == "calsync.jobs" and getattr(r, "fields", {}).get("outcome") == "deferred"
    ]
    told = [r for r in lines if r.levelno == logging.INFO]
    assert len(lines) >= 10 and 1 <= len(told) <= 2  # at most the two jobs that waited, once each
    assert {r.fields["wait_reason"] for r in told} == {"concurrency limited"}  # type: ignore[attr-defined]


def test_every_deferral_has_a_wait_reason() -> None:
    def subclasses(cls: type[Deferred]) -> list[type[Deferred]]:
        return [cls, *(sub for child in cls.__subclasses__() for sub in subclasses(child))]

    assert {cls.reason for cls in subclasses(Deferred)} <= set(WAIT_REASONS)

"""The create marker end to end: producer → broker → worker threads → the real adapters → their emulators.

A first Exchange create is one EWS request; a create after a lost response looks up and adopts, also when
Redis lost everything in between (the marker is in the database); Google never pays the marker's write.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

from calsync.core.producer.reconcile import reconcile
from calsync.core.store.crypto import generate_key
from calsync_emulators.control import EwsControl
from calsync_emulators.server import RunningEmulator
from tests.integration.provider_support import wait_synced
from tests.integration.test_exchange_pipeline import mailbox_account, operations
from tests.integration.test_google_pipeline import google_account
from tests.providers.google.gcal_support import Emulator
from tests.support import Pipeline, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.both_databases]


@pytest.fixture
def ews(stamped_ews_server: RunningEmulator) -> EwsControl:
    """The module's EWS emulator, reset for this test."""
    control = EwsControl(stamped_ews_server.url)
    control.reset()
    return control


@pytest.fixture
def make_pipeline(settings_factory: Any, ews: EwsControl) -> Iterator[Callable[..., Pipeline]]:
    """Worker-side runtimes whose adapters (built by the provider registry) pool 8 connections."""
    built: list[Pipeline] = []

    def make(**overrides: Any) -> Pipeline:
        built.append(Pipeline(settings_factory(**{"secret_key": generate_key(), "worker_threads": 8, **overrides})))
        return built[-1]

    yield make
    for pipeline in built:
        pipeline.app.providers.get("exchange").close()  # type: ignore[attr-defined]
        pipeline.close()


@pytest.fixture
def pipeline(make_pipeline: Callable[..., Pipeline]) -> Pipeline:
    """A pipeline with the test-scale retry schedule."""
    return make_pipeline()


def _soap(ews: EwsControl) -> list[str | None]:
    return [op for op, _ in operations(ews) if op != "GetFolder"]  # the mailbox's connect, once per process


def test_a_first_create_is_one_ews_request(pipeline: Pipeline, ews: EwsControl) -> None:
    account = mailbox_account(pipeline, ews, "alpha")
    receipts = [pipeline.submit([account], title=f"Event {n}") for n in range(3)]
    with pipeline.worker():
        wait_synced(pipeline, {(r.entity_id, account): 1 for r in receipts})
    assert _soap(ews) == ["CreateItem"] * 3
    assert len(ews.items("alpha@example.com")) == 3
    assert all(pipeline.target(r.entity_id, account).create_attempted for r in receipts)


def test_a_create_after_a_lost_response_looks_up_and_adopts_the_item(pipeline: Pipeline, ews: EwsControl) -> None:
    account = mailbox_account(pipeline, ews, "alpha")
    ews.add_fault(operation="CreateItem", after=True, drop=True, times=1)  # created, but the answer never arrives
    receipt = pipeline.submit([account], title="Budget review")
    with pipeline.worker():
        wait_synced(pipeline, {(receipt.entity_id, account): 1})
    [item] = ews.items("alpha@example.com")
    assert item["id"] == pipeline.target(receipt.entity_id, account).external_id
    assert _soap(ews) == ["CreateItem", "FindItem", "UpdateItem"]


def test_the_marker_survives_a_redis_flush(
    make_pipeline: Callable[..., Pipeline], ews: EwsControl, redis_url: str
) -> None:
    pipeline = make_pipeline(retry_schedule=(60,), traffic_retry_delay=60)  # the next try waits in Redis
    account = mailbox_account(pipeline, ews, "alpha")
    ews.add_fault(operation="CreateItem", after=True, drop=True, times=1)
    receipt = pipeline.submit([account], title="Budget review")
    with pipeline.worker():  # the create lands, its answer is lost, its next try is scheduled in Redis...
        wait_until(lambda: pipeline.outcomes(), what="the first attempt to end")
    client = redis.Redis.from_url(redis_url)
    client.delete(*client.scan_iter(match=f"{pipeline.settings.redis_namespace}:*"))  # ...which then loses it all
    client.close()
    assert len(reconcile(pipeline.runtime, older_than=0).requeued) == 1  # the target is pending in the database
    with pipeline.worker():
        wait_synced(pipeline, {(receipt.entity_id, account): 1})
    assert len(ews.items("alpha@example.com")) == 1
    assert _soap(ews) == ["CreateItem", "FindItem", "UpdateItem"]


@pytest.fixture
def google(stamped_google_server: RunningEmulator) -> Emulator:
    """The module's Calendar v3 emulator, reset for this test."""
    emulator = Emulator(stamped_google_server)
    emulator.reset()
    return emulator


def test_a_google_create_writes_no_marker(settings_factory: Any, google: Emulator) -> None:
    pipeline = Pipeline(settings_factory(secret_key=generate_key(), google_api_endpoint=google.api_endpoint))
    try:
        account = google_account(pipeline, google, "alpha")
        receipt = pipeline.submit([account], title="Standup")
        with pipeline.worker():
            wait_synced(pipeline, {(receipt.entity_id, account): 1})
        assert pipeline.target(receipt.entity_id, account).create_attempted is False  # never written
    finally:
        pipeline.close()

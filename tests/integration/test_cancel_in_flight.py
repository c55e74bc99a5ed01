"""A cancellation arriving while the create is still in flight at the provider ends with no live event anywhere:
against the Google emulator (googleapiclient) and the EWS emulator (exchangelib), the create held by a delay fault.

The cancellation is committed while the create job holds the target's lock and waits for the provider. When the
provider answers within ``PROVIDER_TIMEOUT`` (*answered*), the delete job waits for the lock, then deletes the
created event by its id. When it answers later (*abandoned*: the client gave up, the create's retry is dropped as
stale, and the delete, knowing no id, finds nothing), the provider applies the create after the delete; the
delete's re-run ``DELETE_VERIFY_DELAY`` later removes it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from calsync.core.store.crypto import generate_key
from calsync_emulators.control import EwsControl
from calsync_emulators.server import RunningEmulator
from tests.integration.provider_support import TENANT
from tests.integration.test_exchange_pipeline import mailbox_account
from tests.integration.test_google_pipeline import google_account
from tests.providers.google.gcal_support import Api, Emulator
from tests.support import Pipeline, wait_until

pytestmark = pytest.mark.integration

# The create's time in flight: well inside PROVIDER_TIMEOUT (3 s at test scale), or past it.
HOLDS = {"answered": 1500, "abandoned": 4500}
VERIFY_DELAY = 3  # DELETE_VERIFY_DELAY: at least PROVIDER_TIMEOUT, and past the abandoned create's landing


@pytest.fixture
def make_pipeline(settings_factory: Any) -> Iterator[Callable[..., Pipeline]]:
    """Worker-side runtimes with a secret key (the accounts' credentials are encrypted), closed after the test."""
    built: list[Pipeline] = []

    def make(**overrides: Any) -> Pipeline:
        settings = settings_factory(secret_key=generate_key(), delete_verify_delay=VERIFY_DELAY, **overrides)
        built.append(Pipeline(settings))
        return built[-1]

    yield make
    for pipeline in built:
        pipeline.app.providers.close()
        pipeline.close()


def cancel_while_the_create_is_in_flight(pipeline: Pipeline, account: str, live: Callable[[], bool]) -> None:
    """Submit an event, wait until its create job holds the lock (the create is in flight), cancel it, and wait
    until the target is deleted and nothing is ``live`` at the provider any more."""
    with pipeline.worker():
        receipt = pipeline.submit([account], title="Cancelled in flight")
        lock = pipeline.clients.keys.lock(TENANT, receipt.entity_id, account)
        wait_until(lambda: pipeline.clients.redis.exists(lock), what="the create job to hold the target's lock")
        cancelled = pipeline.submit(None, entity_id=receipt.entity_id, operation="delete")
        assert cancelled.version == 2
        row = pipeline.wait_target(receipt.entity_id, account, "deleted")
        wait_until(lambda: not live(), what="no live event at the provider")
        wait_until(lambda: pipeline.outcomes().get("success") == 2, what="the delete's re-run")
    assert (row.synced_version, row.wanted_version) == (2, 2)
    assert "dead_lettered" not in pipeline.outcomes()


@pytest.mark.parametrize("hold", HOLDS)
def test_google_a_cancellation_during_an_in_flight_create_leaves_no_live_event(
    make_pipeline: Callable[..., Pipeline], stamped_google_server: RunningEmulator, hold: str
) -> None:
    emulator = Emulator(stamped_google_server)
    emulator.reset()
    pipeline = make_pipeline(google_api_endpoint=emulator.api_endpoint)
    account = google_account(pipeline, emulator, "alice")
    emulator.fault(method="POST", path="/events$", delay_ms=HOLDS[hold], times=1)

    def live() -> bool:
        return any(event["status"] != "cancelled" for event in Api(emulator).list_all("alice@example.com"))

    cancel_while_the_create_is_in_flight(pipeline, account, live)
    writes = [r for r in emulator.requests() if r["path"].startswith("/calendar/") and r["method"] != "GET"]
    calls = [(r["method"], r["status"]) for r in writes]  # the test's own listings left out
    if hold == "answered":  # the create landed, the delete removed it, its re-run (knowing the id) was not needed
        assert calls == [("POST", 200), ("DELETE", 204)]
    else:  # the delete came first and found nothing; the create landed; the re-run removed it
        assert calls == [("DELETE", 404), ("POST", 200), ("DELETE", 204)]
    assert [event["status"] for event in Api(emulator).list_all("alice@example.com")] == ["cancelled"]


@pytest.mark.parametrize("hold", HOLDS)
def test_ews_a_cancellation_during_an_in_flight_create_leaves_no_live_item(
    make_pipeline: Callable[..., Pipeline], stamped_ews_server: RunningEmulator, hold: str
) -> None:
    ews = EwsControl(stamped_ews_server.url)
    ews.reset()
    pipeline = make_pipeline(worker_threads=8)
    account = mailbox_account(pipeline, ews, "alpha")
    ews.add_fault(operation="CreateItem", delay_ms=HOLDS[hold], times=1)

    cancel_while_the_create_is_in_flight(pipeline, account, lambda: bool(ews.items("alpha@example.com")))
    soap = [r.get("operation") for r in ews.requests() if r.get("operation") in ("CreateItem", "DeleteItem")]
    assert soap == ["CreateItem", "DeleteItem"]
    assert ews.items("alpha@example.com") == []

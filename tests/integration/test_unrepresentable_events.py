"""Content no calendar can hold that still reaches a worker (an event stored before submit refused it) is permanent:
dead-lettered on its first attempt with its reason, never retried, for every real adapter (issue 30, finding 1)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import update

from calsync.core.model.calendar import ProviderName
from calsync.core.store import accounts
from calsync.core.store.schema import events
from tests.integration.content_support import Emulators, emulators, requests_for_mailbox
from tests.support import Pipeline

pytestmark = pytest.mark.integration
__all__ = ["emulators"]

TENANT = "tenant-1"


@pytest.fixture
def pipeline(settings_factory: Any, emulators: Emulators) -> Iterator[Pipeline]:
    """A worker-side runtime whose Google, Exchange and Graph adapters talk to the emulators."""
    built = Pipeline(settings_factory(**emulators.settings()))
    for account in emulators.accounts(TENANT).values():
        with built.clients.db.write() as conn:
            accounts.add_account(conn, tenant_id=TENANT, provider=account.provider, address=account.address,
                                 credentials=built.clients.cipher.encrypt(account.credentials),
                                 options=dict(account.options), account_id=account.id)  # fmt: skip
    yield built
    built.app.providers.close()
    built.close()


def _stored_as_an_older_release_did(pipeline: Pipeline, entity_id: str, start: str, end: str) -> None:
    with pipeline.clients.db.write() as conn:
        conn.execute(update(events).where(events.c.id == entity_id).values(start_at=start, end_at=end))


@pytest.mark.parametrize(
    ("start", "end", "zone"),
    [
        ("9999-12-31T22:00:00-08:00", "9999-12-31T23:00:00-08:00", "America/Los_Angeles"),  # year 10000 in UTC
        ("0001-01-01T00:30:00+09:00", "0001-01-01T01:00:00+09:00", "Asia/Tokyo"),  # year 0 in UTC
    ],
)
def test_a_time_past_the_years_in_utc_is_dead_lettered_at_once_by_every_adapter(
    pipeline: Pipeline, emulators: Emulators, start: str, end: str, zone: str
) -> None:
    providers: list[ProviderName] = ["google", "exchange", "graph"]
    receipt = pipeline.submit([f"acc-{p}" for p in providers], entity_id="evt-far", time_zone=zone)
    _stored_as_an_older_release_did(pipeline, receipt.entity_id, start, end)
    with pipeline.worker():
        failed = {p: pipeline.wait_target("evt-far", f"acc-{p}", "failed") for p in providers}
    letters = {letter.account_id: letter for letter in pipeline.dead_letters(entity_id="evt-far")}
    assert {p: (letters[f"acc-{p}"].reason, letters[f"acc-{p}"].attempts) for p in providers} == {
        "google": ("invalid request", 1),  # the Calendar API's 400 (the emulator: "Invalid start time.")
        "exchange": ("unrepresentable event", 1),  # refused before any request: exchangelib cannot hold it
        "graph": ("unrepresentable event", 1),
    }
    assert all(row.error_class == letters[row.account_id].error_class for row in failed.values())
    assert "Exchange cannot represent event evt-far version 1: OverflowError" in letters["acc-exchange"].last_error
    assert requests_for_mailbox(emulators) == 0  # neither EWS nor Graph was sent anything for it
    assert pipeline.outcomes().get("retry_scheduled", 0) == 0


def test_a_title_exchangelib_refuses_is_dead_lettered_before_any_request(
    pipeline: Pipeline, emulators: Emulators
) -> None:
    receipt = pipeline.submit(["acc-exchange"], entity_id="evt-long")
    with pipeline.clients.db.write() as conn:  # titles of up to 1024 characters were accepted before
        conn.execute(update(events).where(events.c.id == receipt.entity_id).values(title="t" * 300))
    with pipeline.worker():
        pipeline.wait_target("evt-long", "acc-exchange", "failed")
    [letter] = pipeline.dead_letters(entity_id="evt-long")
    assert (letter.reason, letter.attempts) == ("unrepresentable event", 1)
    assert "exceeds length 255" in letter.last_error and requests_for_mailbox(emulators) == 0

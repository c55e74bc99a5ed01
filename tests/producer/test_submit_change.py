"""``calsync.submit_change``, the public entry point, end to end: the database, Redis markers and the real broker."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import calsync
from calsync.core.clients import Clients, connect
from calsync.core.store import accounts, migrate
from calsync.core.store.database import Database
from tests.producer.broker_queue import queued_payloads
from tests.support import change


@pytest.fixture
def clients(settings_factory: Any) -> Iterator[Clients]:
    settings = settings_factory()
    bootstrap = Database(settings.effective_database_url)
    migrate.migrate_to(bootstrap)
    bootstrap.dispose()
    built = connect(settings)
    yield built
    built.close()


def _queued_jobs(clients: Clients) -> list[dict[str, Any]]:
    return queued_payloads(clients.redis_url, clients.settings.redis_namespace, clients.settings.queue)


def test_submit_change_saves_the_intent_and_enqueues_one_job_per_account(clients: Clients) -> None:
    with clients.db.write() as conn:
        account = accounts.add_account(conn, tenant_id="tenant-1", provider="memory", address="a@example.com",
                                       credentials=None, options={}).id  # fmt: skip
    document = change([account], entity_id="evt-public")

    receipt = calsync.submit_change("tenant-1", document, clients=clients, trace_id="trace-public")

    assert isinstance(receipt, calsync.Receipt)
    assert (receipt.entity_id, receipt.version, receipt.deferred_accounts) == ("evt-public", 1, [])
    queued = _queued_jobs(clients)
    assert len(receipt.job_ids) == 1
    assert [job["job_id"] for job in queued] == receipt.job_ids
    assert queued[0]["idempotency_key"] == f"calendar:tenant-1:evt-public:{account}:create"
    assert queued[0]["trace_id"] == "trace-public"

    again = calsync.submit_change("tenant-1", document, clients=clients)
    assert again == receipt, "the Redis markers return the first submission's job ids"
    assert len(_queued_jobs(clients)) == 1


def test_submit_change_raises_the_error_classes_of_the_public_api(clients: Clients) -> None:
    with pytest.raises(calsync.InvalidChange, match="accounts: account acc-none does not exist"):
        calsync.submit_change("tenant-1", change(["acc-none"]), clients=clients)
    with pytest.raises(calsync.EntityNotFound):
        calsync.submit_change("tenant-1", change(None, entity_id="evt-none", operation="delete"), clients=clients)
    assert _queued_jobs(clients) == []

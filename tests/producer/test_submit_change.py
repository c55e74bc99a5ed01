"""``calsync.submit_change``, the public entry point, end to end: the database, Redis markers and the real broker."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import calsync
from calsync.core.model import errors
from calsync.core.runtime import Runtime
from calsync.core.store import accounts, migrate
from tests.producer.broker_queue import queued_payloads
from tests.support import change


@pytest.fixture
def runtime(settings_factory: Any) -> Iterator[Runtime]:
    settings = settings_factory()
    bootstrap = Runtime(settings, check_schema=False)
    migrate.upgrade(bootstrap.db)
    bootstrap.close()
    built = Runtime(settings, role="producer")
    yield built
    built.close()


def _queued_jobs(runtime: Runtime) -> list[dict[str, Any]]:
    return queued_payloads(runtime.redis_url, runtime.settings.redis_namespace, runtime.settings.queue)


def test_submit_change_saves_the_intent_and_enqueues_one_job_per_account(runtime: Runtime) -> None:
    with runtime.db.write() as conn:
        account = accounts.add_account(conn, tenant_id="tenant-1", provider="memory", address="a@example.com",
                                       credentials=None, options={}).id  # fmt: skip
    document = change([account], entity_id="evt-public")

    receipt = calsync.submit_change("tenant-1", document, runtime=runtime, trace_id="trace-public")

    assert isinstance(receipt, calsync.Receipt)
    assert (receipt.entity_id, receipt.version, receipt.deferred_accounts) == ("evt-public", 1, [])
    queued = _queued_jobs(runtime)
    assert len(receipt.job_ids) == 1
    assert [job["job_id"] for job in queued] == receipt.job_ids
    assert queued[0]["idempotency_key"] == f"calendar:tenant-1:evt-public:{account}:create"
    assert queued[0]["trace_id"] == "trace-public"

    again = calsync.submit_change("tenant-1", document, runtime=runtime)
    assert again == receipt, "the Redis markers return the first submission's job ids"
    assert len(_queued_jobs(runtime)) == 1


def test_submit_change_raises_the_error_classes_of_the_public_api(runtime: Runtime) -> None:
    with pytest.raises(calsync.InvalidChange, match="accounts: account acc-none does not exist"):
        calsync.submit_change("tenant-1", change(["acc-none"]), runtime=runtime)
    with pytest.raises(calsync.EntityNotFound):
        calsync.submit_change("tenant-1", change(None, entity_id="evt-none", operation="delete"), runtime=runtime)
    assert _queued_jobs(runtime) == []


def test_the_public_api_is_sorted_and_names_every_error_class() -> None:
    error_classes = {name for name, value in vars(errors).items()
                     if isinstance(value, type) and issubclass(value, errors.CalsyncError)}  # fmt: skip
    assert error_classes <= set(calsync.__all__)
    assert {"submit_change", "Receipt", "Change", "EventFields", "Runtime", "Settings"} <= set(calsync.__all__)
    assert calsync.__all__ == sorted(calsync.__all__)
    assert all(hasattr(calsync, name) for name in calsync.__all__)

"""``calsync.submit_change``, the public entry point, end to end: the database, Redis markers and the real broker."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import redis

import calsync
from calsync.core.runtime import Runtime
from calsync.core.store import accounts, migrate
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
    """The sync payloads waiting in the broker's ready queue, oldest first."""
    client = redis.Redis.from_url(runtime.redis_url)
    queue = runtime.settings.queue
    ids = client.lrange(runtime.keys.ready_queue(queue), 0, -1)
    bodies = [client.hget(runtime.keys.queue_messages(queue), message_id) for message_id in ids]
    client.close()
    messages = [json.loads(body) for body in bodies if body is not None]
    assert {m["actor_name"] for m in messages} <= {"sync_calendar_event"}
    return [m["args"][0] for m in messages]


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

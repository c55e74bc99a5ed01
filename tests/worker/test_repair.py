"""The repair sync a lost compare-and-set enqueues: the newest recorded version, labelled by its wanted state."""

from __future__ import annotations

from typing import Any

import dramatiq
import pytest
from dramatiq.brokers.stub import StubBroker

from calsync.core.messaging.messages import REPAIR_OPTION
from calsync.core.model.payload import JobPayload, new_payload
from calsync.core.model.vocabulary import Outcome
from calsync.core.store import targets
from calsync.core.store.targets import TargetKey
from calsync.core.worker.delivery import Delivery
from calsync.core.worker.job import run_sync
from tests.support import Pipeline


def test_an_older_write_overtaken_by_a_removal_enqueues_a_delete_of_the_newest_version(
    pipeline: Pipeline, stub: StubBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While our v1 write is inside the provider, the account is removed (v2) and another worker deletes it."""
    removed, kept = pipeline.account(), pipeline.account()
    first = pipeline.submit([removed, kept], title="v1")
    key = TargetKey("tenant-1", first.entity_id, removed)
    real_upsert = pipeline.provider.upsert

    def overtaken(account: Any, event: Any, target: Any) -> Any:
        assert pipeline.submit([kept], entity_id=first.entity_id, title="v1").version == 2
        with pipeline.clients.db.write() as tx:  # the other worker's v2 delete is recorded first
            targets.record_synced(tx, key, version=2, external_id=None, etag=None, final_status="deleted")
        return real_upsert(account, event, target)  # ...then our v1 write reaches the provider

    monkeypatch.setattr(pipeline.provider, "upsert", overtaken)
    parts = pipeline.job_parts(stub)
    payload = new_payload(tenant_id="tenant-1", entity_id=first.entity_id, account_id=removed, operation="create",
                          version=1, trace_id="trace-repair")  # fmt: skip
    delivery = Delivery("m-1", "sync_calendar_event", "calendar")
    assert run_sync(parts, delivery, [payload.to_message_arg()], {}) is Outcome.SUCCESS

    [sent] = [dramatiq.Message.decode(body) for body in stub.queues["calendar"].queue]
    repair = JobPayload.model_validate(sent.args[0])
    assert sent.options.get(REPAIR_OPTION) is True, "the repair would be skipped as already synced"
    assert (repair.operation, repair.target_version) == ("delete", 2)
    assert repair.idempotency_key.startswith(f"{payload.idempotency_key}:repair:")
    assert pipeline.target(first.entity_id, removed).synced_version == 2  # our late write did not regress it

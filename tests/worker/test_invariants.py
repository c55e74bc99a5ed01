"""Worker invariants on the real broker with real worker threads, each written so that breaking it fails a test:
the sync result and the idempotency record commit together, a job never crosses tenants or reaches a
disabled account, the provider's etag is kept, and no registered secret survives into a target's
``last_error`` or the DLQ history.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from sqlalchemy import Connection, text

from calsync.core.messaging.messages import sync_message
from calsync.core.model.change import parse_change
from calsync.core.model.payload import new_payload
from calsync.core.model.redaction import MASK, register_secrets
from calsync.core.store import accounts, events, idempotency, targets
from calsync.core.store.targets import TargetKey
from tests.support import Pipeline, change, plan_target, utcnow, wait_until

pytestmark = pytest.mark.integration

_NO_SUCH_TABLE = text("SELECT * FROM calsync_no_such_table")


@pytest.mark.both_databases
def test_a_failed_result_write_leaves_no_idempotency_record_so_the_retry_does_the_effect(
    settings_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If the sync result cannot be committed, the idempotency record must not be either: it would make the
    retry skip as ``already_done`` while the target never records the sync."""
    pipeline = Pipeline(settings_factory(retry_schedule=(1.5,), retry_jitter=0.1))  # time to look before the retry
    real = targets.record_synced
    failures: list[int] = []

    def result_write_fails_once(tx: Connection, *args: Any, **kwargs: Any) -> bool:
        won = real(tx, *args, **kwargs)
        if not failures:
            failures.append(1)
            tx.execute(_NO_SUCH_TABLE)  # a real driver error inside the result's transaction
        return won

    monkeypatch.setattr(targets, "record_synced", result_write_fails_once)
    try:
        account = pipeline.account()
        receipt = pipeline.submit([account])
        key = f"calendar:tenant-1:{receipt.entity_id}:{account}:create"
        with pipeline.worker():
            wait_until(lambda: pipeline.outcomes().get("retry_scheduled") == 1, what="the failed result write")
            with pipeline.clients.db.read() as conn:
                assert not idempotency.succeeded(conn, key), "an idempotency record outlived its failed result"
            assert pipeline.target(receipt.entity_id, account).synced_version == 0
            settled = wait_until(
                lambda: {k: v for k, v in pipeline.outcomes().items() if k in ("success", "already_done")},
                what="the retry after the failed result write",
            )
        assert settled == {"success": 1}, "the retry was skipped as already done"
        assert [c.effect for c in pipeline.provider.calls()] == ["created", "adopted"]
        row = pipeline.target(receipt.entity_id, account)
        assert (row.status, row.synced_version) == ("synced", 1)
        with pipeline.clients.db.read() as conn:
            assert idempotency.succeeded(conn, key)
        assert pipeline.outcomes() == {"retry_scheduled": 1, "success": 1}
    finally:
        pipeline.close()


def test_a_job_naming_another_tenants_account_is_dead_lettered_without_calling_the_provider(
    pipeline: Pipeline,
) -> None:
    """The worker re-checks the tenant: a payload of tenant A naming tenant B's account is not found."""
    foreign = pipeline.account(tenant="tenant-b", account_id="acc-b")
    fields = parse_change(change([foreign], title="not yours")).event
    assert fields is not None
    with pipeline.clients.db.write() as conn:  # a row the producer would refuse (another test checks that)
        events.insert_event(conn, "tenant-a", "evt-a", fields, "none")
        plan_target(conn, TargetKey("tenant-a", "evt-a", foreign), wanted="present", version=1, due_at=utcnow())
    payload = new_payload(
        tenant_id="tenant-a", entity_id="evt-a", account_id=foreign, operation="create", version=1, trace_id="x"
    )
    with pipeline.worker():
        pipeline.broker.enqueue(sync_message(pipeline.settings.queue, payload))
        wait_until(lambda: pipeline.dead_letters() or pipeline.provider.calls(), what="the cross-tenant job to end")
    assert pipeline.provider.calls() == []
    [record] = pipeline.dead_letters()
    assert (record.error_class, record.job_id) == ("EntityNotFound", payload.job_id)
    assert pipeline.provider.events() == []


def test_a_temporary_error_never_stores_a_registered_secret(settings_factory: Any) -> None:
    """A provider error quoting a credential: masked in the target's ``last_error`` while the retry waits, and
    in every DLQ history entry once retries run out."""
    secret = f"opal-{uuid.uuid4().hex[:10]}-kestrel"
    register_secrets({"refresh_token": secret})
    # The first retry waits long enough to read the target while it waits; the second comes at once.
    pipeline = Pipeline(settings_factory(retry_schedule=(2.0, 0.05), retry_jitter=0.1))
    try:
        account = pipeline.account()
        pipeline.provider.add_fault(error="unavailable", message=f"upstream said: token {secret} is throttled")
        receipt = pipeline.submit([account])
        with pipeline.worker():
            waiting = wait_until(
                lambda: pipeline.target(receipt.entity_id, account).last_error, what="the retry to be noted"
            )
            assert secret not in waiting and MASK in waiting
            [record] = wait_until(pipeline.dead_letters, what="the dead letter")
        assert [h["attempt"] for h in record.error_history] == [1, 2, 3]
        for entry in record.error_history:
            assert secret not in entry["message"] and MASK in entry["message"]
        assert secret not in record.last_error
        failed = pipeline.target(receipt.entity_id, account)
        assert failed.status == "failed" and failed.last_error is not None and secret not in failed.last_error
    finally:
        pipeline.close()


def test_a_job_for_an_account_disabled_after_submission_is_dead_lettered_without_calling_the_provider(
    pipeline: Pipeline,
) -> None:
    account = pipeline.account()
    receipt = pipeline.submit([account])
    with pipeline.clients.db.write() as conn:  # disabled while the job waits in the queue
        accounts.update_account(conn, account, status="disabled")
    with pipeline.worker():
        wait_until(lambda: pipeline.dead_letters() or pipeline.provider.calls(), what="the job to end")
    assert pipeline.provider.calls() == []
    [record] = pipeline.dead_letters()
    assert (record.error_class, record.job_id) == ("AccountInactive", receipt.job_ids[0])
    assert pipeline.target(receipt.entity_id, account).status == "failed"


def test_the_target_keeps_the_etag_the_provider_returned(pipeline: Pipeline) -> None:
    """Conditional updates need the etag of the provider's current copy, after a create and after an update."""
    account = pipeline.account()
    first = pipeline.submit([account], title="v1")
    with pipeline.worker():
        pipeline.wait_target(first.entity_id, account, "synced")
        [created] = pipeline.provider.events(account)
        assert pipeline.target(first.entity_id, account).external_etag == created.etag
        pipeline.submit(None, entity_id=first.entity_id, title="v2")
        wait_until(lambda: pipeline.target(first.entity_id, account).synced_version == 2, what="v2 synced")
    [updated] = pipeline.provider.events(account)
    assert updated.etag != created.etag
    assert pipeline.target(first.entity_id, account).external_etag == updated.etag

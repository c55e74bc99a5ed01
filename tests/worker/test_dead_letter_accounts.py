"""What a dead-lettered AuthRevoked does to its account: an active one awaits re-authorization, no other changes."""

from __future__ import annotations

import pytest
from dramatiq.broker import MessageProxy
from dramatiq.brokers.stub import StubBroker

from calsync.core.messaging.messages import sync_message
from calsync.core.model.calendar import AccountStatus
from calsync.core.model.errors import AuthRevoked
from calsync.core.model.payload import new_payload
from calsync.core.store import accounts
from calsync.core.worker.delivery import Delivery, current_delivery
from calsync.core.worker.middleware.dead_letters import DeadLetterRecorder
from tests.support import Pipeline


@pytest.mark.parametrize(
    ("before", "after"),
    [("active", "needs_reauth"), ("disabled", "disabled"), ("needs_reauth", "needs_reauth")],
    ids=["active", "disabled meanwhile", "already awaiting"],
)
def test_revoked_credentials_mark_only_an_active_account(
    pipeline: Pipeline, stub: StubBroker, before: AccountStatus, after: AccountStatus
) -> None:
    account = pipeline.account()
    receipt = pipeline.submit([account])
    with pipeline.clients.db.write() as conn:
        accounts.update_account(conn, account, status=before)
    payload = new_payload(tenant_id="tenant-1", entity_id=receipt.entity_id, account_id=account, operation="create",
                          version=1, trace_id="trace-dlq")  # fmt: skip
    message = MessageProxy(sync_message(pipeline.settings.queue, payload))
    delivery = Delivery(message.message_id, message.actor_name, message.queue_name, payload=payload)
    delivery.error = AuthRevoked("the refresh token was revoked")
    current_delivery.set(delivery)
    try:
        DeadLetterRecorder(pipeline.clients.db).before_nack(stub, message)
    finally:
        current_delivery.set(None)
    [record] = pipeline.dead_letters()
    assert record.error_class == "AuthRevoked"
    with pipeline.clients.db.read() as conn:
        summary = accounts.get_summary(conn, account)
    assert summary is not None and summary.status == after

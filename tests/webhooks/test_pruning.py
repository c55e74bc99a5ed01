"""The outbox under housekeeping, end to end: a dead-lettered delivery survives the passes and replays."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import pytest

from calsync.core.producer.dead_letters import replay
from calsync.core.producer.reconcile import reconcile
from calsync.core.webhooks import store
from tests.support import wait_until
from tests.webhooks.conftest import Hooks
from tests.webhooks.receiver import Receiver, serve

pytestmark = pytest.mark.integration


@pytest.fixture
def refusing() -> Iterator[Receiver]:
    """Answers 410 until the test fixes it."""
    yield from serve(Receiver(answer=lambda n: 410))


def _past_retention(hooks: Hooks) -> dt.datetime:
    """A moment when every row written so far has been unchanged for longer than ``WEBHOOK_RETENTION``."""
    return dt.datetime.now(dt.UTC) + dt.timedelta(seconds=hooks.pipeline.settings.webhook_retention + 1)


def test_a_notification_is_pruned_once_its_dead_letter_was_replayed_and_delivered(
    hooks: Hooks, receiver: Receiver, refusing: Receiver
) -> None:
    pipeline = hooks.pipeline
    delivered = hooks.endpoint(receiver)
    refused = hooks.endpoint(refusing)
    with pipeline.worker():
        pipeline.submit([pipeline.account()])
        (record,) = wait_until(lambda: pipeline.dead_letters(kind="webhook"), what="the webhook dead letter")
        notification_id = record.payload["notification_id"]
        wait_until(lambda: hooks.status(notification_id, delivered) == "delivered", what="the other delivery")

        # Past the retention of every row as it is now: only the open dead letter may keep it.
        kept = reconcile(pipeline.clients, now=_past_retention(hooks)).as_json()
        assert (kept["purged_webhook_notifications"], kept["purged_webhook_deliveries"]) == (0, 0)
        refusing.answer = lambda n: 200
        report = replay(pipeline.clients, [record])
        assert len(report.replayed) == 1, report.skipped
        wait_until(lambda: hooks.status(notification_id, refused) == "delivered", what="redelivered")

    pruned = reconcile(pipeline.clients, now=_past_retention(hooks)).as_json()
    assert (pruned["purged_webhook_notifications"], pruned["purged_webhook_deliveries"]) == (1, 2)
    assert hooks.notifications() == [] and refusing.ids() == [notification_id, notification_id]
    with pipeline.clients.db.read() as conn:
        assert store.count_deliveries(conn) == {}

"""A busy lock defers the job by ``LOCK_RETRY_DELAY`` ± ``RETRY_JITTER``, read from ``broker.enqueue``."""

from __future__ import annotations

import math
from pathlib import Path
from typing import cast

import pytest
from dramatiq.broker import MessageProxy
from dramatiq.brokers.stub import StubBroker

from calsync.core.messaging.messages import sync_message
from calsync.core.model.errors import TargetLocked
from calsync.core.model.payload import new_payload
from calsync.core.store.database import Database
from calsync.core.worker.middleware.retries import ScheduledRetries
from tests.spies import EnqueueSpy
from tests.support import make_settings

DEFERRALS = 8


def test_a_deferral_waits_the_lock_retry_delay_spread_by_the_jitter(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A busy lock's deferral is spread like a retry, so deliveries queued behind one lock do not collide again."""
    delay, jitter = 2.0, 0.2
    broker = StubBroker(middleware=[])
    broker.declare_queue("calendar")
    try:
        spy = EnqueueSpy(broker, monkeypatch)
        settings = make_settings(tmp_path, retry_jitter=jitter, lock_retry_delay=delay, lock_max_waits=DEFERRALS)
        retries = ScheduledRetries(cast(Database, None), settings)  # a deferral touches no database
        for _ in range(DEFERRALS):
            message = sync_message("calendar", new_payload(tenant_id="tenant-1", entity_id="e1", account_id="acc",
                                                           operation="create", version=1, trace_id="t"))  # fmt: skip
            retries.after_process_message(broker, MessageProxy(message), exception=TargetLocked("busy"))
        delays = [sent.delay for sent in spy.sent]
        assert len(delays) == DEFERRALS and all(d is not None for d in delays)
        low, high = math.floor(delay * 1000 * (1 - jitter)), math.ceil(delay * 1000 * (1 + jitter))
        assert all(low <= d <= high for d in delays if d is not None), f"{delays} outside [{low}, {high}] ms"
        assert len(set(delays)) > 1, f"every deferral waited exactly {delays[0]} ms"
        assert all(sent.message.options["lock_waits"] == 1 and "retries" not in sent.message.options
                   for sent in spy.sent)  # fmt: skip
    finally:
        broker.close()

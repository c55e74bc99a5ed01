"""A message for an unknown actor is an expected outcome: one warning line naming the ids its payload carried and
the DLQ reason, no traceback and nothing at error level, on both brokers."""

from __future__ import annotations

import dramatiq
import pytest

from tests.support import Pipeline, wait_until
from tests.worker.test_quiet_failures import _Lines, lines

pytestmark = [pytest.mark.integration, pytest.mark.both_brokers]
__all__ = ["lines"]  # the fixture, imported for this module's tests


def test_an_unknown_actor_is_one_warning_line_with_its_ids_and_reason(pipeline: Pipeline, lines: _Lines) -> None:
    payload = {"job_id": "job_lost", "tenant_id": "tenant-1", "entity_id": "evt_9", "account_id": "acc_9",
               "trace_id": "req_77"}  # fmt: skip
    with pipeline.worker():
        pipeline.broker.enqueue(dramatiq.Message(queue_name=pipeline.settings.queue, actor_name="sync_calendar_evnt",
                                                 args=(payload,), kwargs={}, options={}))  # fmt: skip
        [record] = wait_until(pipeline.dead_letters, what="the message in the DLQ")
    assert lines.at("error", "critical") == [] and [line for line in lines.lines if "exc" in line] == []
    [warning] = lines.at("warning")
    assert warning["message"] == "message quarantined" and warning["reason"] == record.reason
    assert record.reason == "quarantined: unknown actor" and warning["job_type"] == "sync_calendar_evnt"
    assert {k: warning[k] for k in payload} == payload
    assert (record.entity_id, record.account_id, record.trace_id) == ("evt_9", "acc_9", "req_77")

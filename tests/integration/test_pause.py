"""``calsync pause`` / ``resume`` on both brokers: a paused worker stays alive and hands out nothing; on resume
the held job runs once, on its first attempt. The switch is flipped and read through the real entry point."""

from __future__ import annotations

from typing import Any

import pytest

from calsync.core.messaging.consumer_pause import pause_of
from calsync.core.observability.pipeline_state import StateReader
from calsync.core.worker.pause import PauseGate
from tests.cli.process import calsync, json_out
from tests.support import Pipeline, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.both_brokers]


@pytest.fixture
def paused_pipeline(settings_factory: Any) -> Any:
    built = Pipeline(settings_factory(heartbeat_interval=0.2, heartbeat_ttl=2))
    yield built
    built.close()


def _every_worker_paused(pipeline: Pipeline) -> bool:
    workers = StateReader(pipeline.clients).read().workers or []
    return bool(workers) and all(w.paused for w in workers)


@pytest.mark.slow
def test_a_paused_worker_holds_every_job_until_resumed(paused_pipeline: Pipeline) -> None:
    pipeline = paused_pipeline
    settings, queue = pipeline.settings, pipeline.settings.queue
    gate = pause_of(pipeline.broker)
    assert isinstance(gate, PauseGate)
    account = pipeline.account()
    with pipeline.worker(threads=2):
        paused = json_out(calsync("pause", "--reason", "provider maintenance", settings=settings))
        assert (paused["paused"], paused["already_paused"], paused["reason"]) == (True, False, "provider maintenance")
        # The heartbeat says so only once every consumer of the process has turned while the switch was on.
        wait_until(lambda: _every_worker_paused(pipeline), what="the worker's heartbeat to report it paused")

        receipt = pipeline.submit([account], title="held")
        turns = gate.turns[queue]
        wait_until(lambda: gate.turns[queue] >= turns + 3, what="the consumer to look again and stay paused")
        assert pipeline.target(receipt.entity_id, account).status == "pending"
        assert pipeline.provider.calls() == []
        status = json_out(calsync("status", "--json", settings=settings))
        assert status["paused"]["reason"] == "provider maintenance"
        assert [q["ready"] for q in status["queues"] if q["queue"] == queue] == [1]  # still on the broker
        assert status["workers"] and all(w["paused"] and w["healthy"] for w in status["workers"])
        again = json_out(calsync("pause", settings=settings))
        assert again["already_paused"] and again["since"] == paused["since"]

        resumed = json_out(calsync("resume", settings=settings))
        assert (resumed["paused"], resumed["was_paused"], resumed["paused_since"]) == (False, True, paused["since"])
        row = pipeline.wait_target(receipt.entity_id, account, "synced")
    assert row.synced_version == 1 and len(pipeline.provider.calls()) == 1
    assert pipeline.outcomes() == {"success": 1}  # its first attempt: nothing retried, nothing dead-lettered
    assert pipeline.dead_letters() == []
    assert json_out(calsync("resume", settings=settings)) == {"paused": False, "was_paused": False}

"""``calsync status``: the same state as the exporter, plus recent throughput, as JSON, a table or a live view."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner, Result

from calsync.actors.cli import status as status_command
from calsync.actors.cli.main import cli
from calsync.actors.cli.status import Status, format_age, read_status
from calsync.core.model.intake import INTAKE_JOB
from calsync.core.model.payload import SYNC_JOB
from calsync.core.model.vocabulary import Outcome
from calsync.core.observability.pipeline_state import StateReader
from calsync.core.redis import live_workers
from calsync.core.redis.stats import JobStats
from tests.support import Pipeline


def _run(pipeline: Pipeline, *args: str) -> Result:
    return CliRunner().invoke(cli, ["status", *args], env=pipeline.settings.as_environment(), catch_exceptions=False)


def _busy(pipeline: Pipeline) -> None:
    """Two queued jobs, a live worker heartbeat, and some finished jobs counted by the workers."""
    account = pipeline.account()
    pipeline.submit([account], title="one")
    pipeline.submit([account], title="two")
    live_workers.renew(pipeline.clients.redis, pipeline.clients.keys, "pod-a:1", "{}", ttl_ms=60_000)
    pipeline.app.stats.record(Outcome.SUCCESS, count=3)
    pipeline.app.stats.record(Outcome.DEAD_LETTERED)
    pipeline.app.stats.flush()  # what a worker's stats thread does every second


def test_json_shows_queues_dead_letters_targets_workers_and_throughput(pipeline: Pipeline) -> None:
    _busy(pipeline)
    result = _run(pipeline, "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    queue, bulk, intake, webhooks, sweeps = doc["queues"]
    assert (queue["queue"], queue["ready"], queue["delayed"], queue["inflight"]) == ("calendar", 2, 0, 0)
    assert (bulk["queue"], bulk["ready"]) == ("calendar-bulk", 0)
    assert (intake["queue"], intake["ready"]) == ("intake", 0)
    assert (webhooks["queue"], webhooks["ready"]) == ("webhooks", 0)
    assert (sweeps["queue"], sweeps["ready"]) == ("calendar-drift", 0)
    assert queue["oldest_age_seconds"] >= 0
    assert doc["dead_letters"] == {
        "open": 0, "open_by_reason": {},
        "open_by_job_type": {SYNC_JOB: 0, INTAKE_JOB: 0, "reconcile": 0, "dispatch_webhook": 0, "deliver_webhook": 0,
                             "sweep_account": 0},
        "oldest_age_seconds": 0.0,
    }  # fmt: skip
    assert doc["targets"]["by_status"] == {"pending": 2, "failed": 0}
    assert doc["workers_active"] == 1
    assert doc["throughput"] == {f"last_{m}m": {"dead_lettered": 1, "success": 3} for m in (5, 60)}
    assert doc["errors"] == {}


def test_the_table_names_every_section(pipeline: Pipeline) -> None:
    _busy(pipeline)
    result = _run(pipeline)
    assert result.exit_code == 0, result.output
    for heading in ("active workers: 1", "queues", "open dead letters", "sync targets", "job outcomes", "calendar"):
        assert heading in result.output


def test_watch_refreshes_until_its_count(pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch) -> None:
    _busy(pipeline)
    reads: list[Status] = []

    def counted(reader: StateReader, stats: JobStats) -> Status:
        reads.append(read_status(reader, stats))
        return reads[-1]

    monkeypatch.setattr(status_command, "read_status", counted)
    result = _run(pipeline, "--watch", "--interval", "0.05", "--count", "3")
    assert result.exit_code == 0, result.output
    assert len(reads) == 3 and "job outcomes" in result.output


def test_json_watch_prints_one_document_per_line(pipeline: Pipeline) -> None:
    _busy(pipeline)
    result = _run(pipeline, "--json", "--watch", "--interval", "0.05", "--count", "2")
    assert result.exit_code == 0, result.output
    assert [json.loads(line)["workers_active"] for line in result.output.splitlines()] == [1, 1]


def test_ages_read_like_a_person_would_say_them() -> None:
    assert [format_age(s) for s in (None, 0, 42.4, 303, 7500, 273600)] == ["n/a", "0s", "42s", "5m 03s", "2h 05m",
                                                                          "3d 04h"]  # fmt: skip

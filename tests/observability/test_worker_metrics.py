"""A real ``calsync worker`` processes real jobs of every outcome; its :PORT and the exporter are scraped
over HTTP and must show exactly what happened. Then the worker is SIGKILLed and its heartbeat goes stale."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.multiprocess import MultiProcessCollector

from calsync.core.config.settings import Settings
from calsync.core.messaging.messages import sync_message
from calsync.core.model.intake import INTAKE_JOB
from calsync.core.model.payload import SYNC_JOB, new_payload
from calsync.core.worker.metrics import calsync_version
from calsync.providers.memory import MemoryProvider
from tests.observability.conftest import (
    PROMTOOL_LINT_FAILED,
    Exposition,
    check_metrics,
    running,
    scrape,
)
from tests.support import Pipeline, free_port, probe_command, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SYNC = {"job_type": SYNC_JOB, "provider": "memory"}
# The one problem promtool finds on the worker endpoint is Dramatiq's own histogram, which we cannot rename.
DRAMATIQ_LINT = 'dramatiq_message_duration_milliseconds use base unit "seconds" instead of "milliseconds"'


def _heartbeat_series(metrics_dir: Path) -> dict[str, float]:
    """The heartbeat gauge as the multiprocess files hold it (what :PORT would serve), by worker label."""
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=str(metrics_dir))
    series: dict[str, float] = {}
    for family in registry.collect():
        if family.name == "calsync_worker_heartbeat_timestamp_seconds":
            series.update({s.labels["worker"]: s.value for s in family.samples})
    return series


def _probe(settings: Settings) -> int:
    command = probe_command(settings.effective_heartbeat_dir, settings.heartbeat_ttl)
    return subprocess.run(command, capture_output=True, timeout=10).returncode


def _submit_every_outcome(pipeline: Pipeline, provider: MemoryProvider, account: str) -> dict[str, str]:
    """Queue, in this order, jobs that end as: success, already_done, retry then success, stale then
    success, lock_busy then success (the test holds the lock), dead letter."""
    provider.add_fault(op="upsert", error="unavailable", title="^retried$", times=1)
    provider.add_fault(op="upsert", error="forbidden", title="^refused$")
    entities = {}
    entities["plain"] = pipeline.submit([account], title="plain").entity_id
    duplicate = new_payload(tenant_id="tenant-1", entity_id=entities["plain"], account_id=account,
                            operation="create", version=1, trace_id="duplicate")  # fmt: skip
    pipeline.broker.enqueue(sync_message(pipeline.settings.queue, duplicate))
    entities["retried"] = pipeline.submit([account], title="retried").entity_id
    entities["edited"] = pipeline.submit([account], entity_id="evt-edited", title="first").entity_id
    pipeline.submit([account], entity_id="evt-edited", title="second")
    entities["locked"] = pipeline.submit([account], entity_id="evt-locked", title="locked").entity_id
    entities["refused"] = pipeline.submit([account], title="refused").entity_id
    return entities


def _counted(page: Exposition, name: str) -> dict[frozenset[tuple[str, str]], float]:
    """The series of ``name`` that were incremented (every known one is exported at 0 from boot)."""
    return {labels: value for labels, value in page.series(name).items() if value}


def _assert_worker_metrics(worker: Exposition) -> None:
    # The zero series exist before their first increment (issue 35: increase() sees a first burst).
    assert worker.value("calsync_dead_letters_total", job_type=SYNC_JOB, reason="needs re-authorization") == 0
    assert worker.value("calsync_jobs_total", job_type=SYNC_JOB, provider="google", outcome="dead_lettered") == 0
    assert _counted(worker, "calsync_jobs_total") == {
        frozenset({**SYNC, "outcome": outcome}.items()): count
        for outcome, count in {
            "success": 4, "already_done": 1, "retry_scheduled": 1, "stale": 1, "lock_busy": 1, "dead_lettered": 1,
        }.items()
    }  # fmt: skip
    assert worker.value("calsync_job_duration_seconds_count", **SYNC) == 9
    assert worker.value("calsync_job_duration_seconds_bucket", **SYNC, le="+Inf") == 9
    assert _counted(worker, "calsync_job_retries_total") == {
        frozenset({**SYNC, "error_class": "ProviderUnavailable"}.items()): 1
    }
    assert _counted(worker, "calsync_provider_requests_total") == {
        frozenset({"provider": "memory", "operation": "create", "status_class": "ok"}.items()): 4,
        frozenset({"provider": "memory", "operation": "create", "status_class": "temporary_error"}.items()): 1,
        frozenset({"provider": "memory", "operation": "create", "status_class": "permanent_error"}.items()): 1,
    }
    assert worker.value("calsync_provider_request_duration_seconds_count", provider="memory", operation="create") == 6
    # The already_done and stale deliveries are acked before the lock; the lock-busy one did not get it.
    assert _counted(worker, "calsync_lock_acquisitions_total") == {
        frozenset({"result": "acquired"}.items()): 6,
        frozenset({"result": "busy"}.items()): 1,
    }
    assert _counted(worker, "calsync_dead_letters_total") == {
        frozenset({"job_type": SYNC_JOB, "reason": "forbidden"}.items()): 1
    }
    assert worker.series("calsync_build_info") == {frozenset({"version": calsync_version()}.items()): 1}
    [beat] = worker.series("calsync_worker_heartbeat_timestamp_seconds")
    assert dict(beat)["worker"].startswith(socket.gethostname() + ":")
    # Dramatiq's own metrics share the endpoint; its retry counter counts our single retry twice.
    labels = {"queue_name": "calendar", "actor_name": SYNC_JOB}
    assert worker.value("dramatiq_messages_total", **labels) == 9
    assert worker.value("dramatiq_message_rejects_total", **labels) == 1
    assert worker.value("dramatiq_messages_inprogress", **labels) == 0
    assert worker.total("dramatiq_message_retries_total", actor_name=SYNC_JOB) == 2


def _assert_exporter_metrics(exporter: Exposition) -> None:
    for name in ("ready", "delayed", "inflight"):
        for queue in ("calendar", "intake"):
            assert exporter.value(f"calsync_queue_{name}_messages", queue=queue) == 0
    assert exporter.value("calsync_queue_oldest_message_age_seconds", queue="calendar") == 0
    assert exporter.series("calsync_dead_letters_open") == {
        frozenset({"job_type": SYNC_JOB}.items()): 1,
        frozenset({"job_type": INTAKE_JOB}.items()): 0,
        frozenset({"job_type": "reconcile"}.items()): 0,
        frozenset({"job_type": "dispatch_webhook"}.items()): 0,
        frozenset({"job_type": "deliver_webhook"}.items()): 0,
        frozenset({"job_type": "sweep_account"}.items()): 0,
    }
    oldest_dead_letter = exporter.value("calsync_dead_letter_oldest_age_seconds")
    assert oldest_dead_letter is not None and 0 < oldest_dead_letter < 600
    assert exporter.series("calsync_sync_targets") == {
        frozenset({"status": status}.items()): count for status, count in {"pending": 0, "failed": 1}.items()
    }
    assert exporter.value("calsync_sync_pending_oldest_age_seconds") == 0
    assert exporter.value("calsync_workers_active") == 1
    for source in ("broker", "database", "redis"):
        assert exporter.value("calsync_exporter_source_up", source=source) == 1


def test_a_real_worker_exposes_exact_metrics_and_its_death_shows(
    settings_factory: Any, tmp_path: Path, promtool: str
) -> None:
    settings = settings_factory(
        metrics_port=free_port(),
        heartbeat_interval=0.5,
        heartbeat_ttl=3,
        lock_retry_delay=2.5,
    )
    provider = MemoryProvider(settings.effective_memory_provider_path)
    pipeline = Pipeline(settings, provider=provider)
    exporter_port = free_port()
    try:
        account = pipeline.account()
        locks = pipeline.app.locks
        lock = locks.acquire(pipeline.clients.keys.lock("tenant-1", "evt-locked", account))
        assert lock is not None
        entities = _submit_every_outcome(pipeline, provider, account)
        worker_args = ["worker", "--processes", "1", "--threads", "1"]  # one thread: a deterministic order
        exporter_args = ["exporter", "--host", "127.0.0.1", "--port", str(exporter_port)]
        with (
            running(settings, worker_args, tmp_path / "worker.log") as worker_process,
            running(settings, exporter_args, tmp_path / "exporter.log") as exporter_process,
        ):
            wait_until(lambda: pipeline.outcomes().get("lock_busy"), timeout=60, what="the lock-busy delivery")
            locks.release(lock)
            for name, entity in entities.items():
                pipeline.wait_target(entity, account, "failed" if name == "refused" else "synced", timeout=60)

            worker_url = f"http://127.0.0.1:{settings.metrics_port}/metrics"
            worker = wait_until(
                lambda: (page := scrape(worker_url)).value("calsync_job_duration_seconds_count", **SYNC) == 9 and page,
                what="every delivery to be observed",
            )
            _assert_worker_metrics(worker)
            exporter = scrape(f"http://127.0.0.1:{exporter_port}/metrics")
            _assert_exporter_metrics(exporter)

            assert check_metrics(promtool, worker.text) == (PROMTOOL_LINT_FAILED, [DRAMATIQ_LINT])
            ours = "\n".join(line for line in worker.text.splitlines() if "dramatiq_" not in line) + "\n"
            assert check_metrics(promtool, ours) == (0, [])
            assert check_metrics(promtool, exporter.text) == (0, [])

            # SIGKILL one worker process: no graceful shutdown, so nothing removes its series or key.
            assert _probe(settings) == 0
            [label] = [dict(s)["worker"] for s in worker.series("calsync_worker_heartbeat_timestamp_seconds")]
            pid = int(label.rsplit(":", 1)[1])
            os.kill(pid, signal.SIGKILL)
            killed_at = time.time()
            exporter_url = f"http://127.0.0.1:{exporter_port}/metrics"
            wait_until(lambda: scrape(exporter_url).value("calsync_workers_active") == 0, what="workers_active to drop")
            last_beat = _heartbeat_series(settings.effective_metrics_dir)[label]
            assert last_beat <= killed_at  # the series stays, frozen at its last beat: stale
            wait_until(lambda: _probe(settings) != 0, what="the liveness probe to fail")
            assert _heartbeat_series(settings.effective_metrics_dir)[label] == last_beat
            assert worker_process.proc.wait(timeout=30) != 0  # Dramatiq stops when a worker process dies
            exporter_process.stop()
            assert exporter_process.proc.returncode == 0  # SIGTERM stops the exporter cleanly
    finally:
        pipeline.close()

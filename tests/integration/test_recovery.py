"""Nothing accepted is ever lost: lost messages, failed enqueues and killed workers are recovered."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import redis

from calsync.core.config.settings import child_environment
from calsync.core.producer.reconcile import reconcile
from calsync.providers.memory import MemoryProvider
from tests.support import Pipeline, wait_until

pytestmark = pytest.mark.integration


def test_redis_flushed_after_submit_is_recovered_by_reconcile(pipeline: Pipeline, redis_url: str) -> None:
    account = pipeline.account()
    receipts = [pipeline.submit([account], title=f"event {n}") for n in range(3)]
    client = redis.Redis.from_url(redis_url)
    lost = list(client.scan_iter(match=f"{pipeline.settings.redis_namespace}:*"))
    assert lost  # the queued messages (and dedup markers) are there...
    client.delete(*lost)  # ...until Redis loses everything

    assert reconcile(pipeline.clients).requeued == []  # not overdue yet: their jobs may still be queued
    report = reconcile(pipeline.clients, older_than=0)
    assert len(report.requeued) == 3
    with pipeline.worker():
        pipeline.wait_idle()
    for receipt in receipts:
        assert pipeline.target(receipt.entity_id, account).status == "synced"
    assert len(pipeline.provider.events(account)) == 3


def test_a_failed_enqueue_after_commit_is_deferred_then_reconciled(
    pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    account = pipeline.account()

    def broker_down(*args: Any, **kwargs: Any) -> None:
        raise ConnectionError("broker unreachable")

    monkeypatch.setattr(pipeline.broker, "enqueue", broker_down)
    receipt = pipeline.submit([account])
    assert receipt.job_ids == [] and receipt.deferred_accounts == [account]
    assert pipeline.target(receipt.entity_id, account).status == "pending"  # the intent was saved
    monkeypatch.undo()

    assert len(reconcile(pipeline.clients, older_than=0).requeued) == 1
    with pipeline.worker():
        pipeline.wait_target(receipt.entity_id, account, "synced")


def test_resubmitting_an_identical_change_enqueues_nothing_new(pipeline: Pipeline) -> None:
    account = pipeline.account()
    first = pipeline.submit([account], title="same")
    again = pipeline.submit([account], entity_id=first.entity_id, title="same")
    assert (again.version, again.job_ids) == (first.version, first.job_ids)
    with pipeline.worker():
        pipeline.wait_idle()
    assert pipeline.outcomes() == {"success": 1}


def _calsync() -> str:
    found = shutil.which("calsync", path=str(Path(sys.executable).parent))
    assert found, "the calsync console script is not installed in this environment"
    return found


@pytest.mark.slow
@pytest.mark.both_brokers
def test_a_worker_killed_mid_job_is_redelivered_without_a_second_effect(settings_factory: Any, tmp_path: Path) -> None:
    # Production broker recovery (heartbeat 20 s, the production profile's maintenance): the claim is theirs.
    settings = settings_factory(
        broker_heartbeat_timeout=20,
        profile="production",
        provider_timeout=5,
        job_time_limit=10,
        lock_ttl=12,
    )
    provider = MemoryProvider(settings.effective_memory_provider_path)
    pipeline = Pipeline(settings, provider=provider)
    env = child_environment(settings)
    logs = tmp_path / "workers.log"
    workers: list[subprocess.Popen[bytes]] = []

    def start_worker() -> subprocess.Popen[bytes]:
        with open(logs, "ab") as out:
            proc = subprocess.Popen(
                [_calsync(), "worker", "--processes", "1", "--threads", "2"],
                env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        workers.append(proc)
        return proc

    try:
        account = pipeline.account()
        # The provider applies the create, then hangs: the worker dies before it can record anything.
        provider.add_fault(op="upsert", error=None, after=True, delay_ms=120_000, times=1)
        receipt = pipeline.submit([account])
        first = start_worker()
        wait_until(lambda: [c for c in provider.calls() if c.effect == "created"], timeout=60, what="the create")
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(timeout=10)

        start_worker()
        wait_until(lambda: pipeline.outcomes(), timeout=60, what="redelivery within 60 s")
        pipeline.wait_target(receipt.entity_id, account, "synced", timeout=60)
        assert [c.effect for c in provider.calls()] == ["created", "adopted"]
        assert len(provider.events(account)) == 1
    except BaseException:
        print(logs.read_text(errors="replace")[-5000:])
        print("worker exit codes:", [proc.poll() for proc in workers])
        client = pipeline.clients.redis
        namespace = settings.redis_namespace
        print("broker heartbeats:", client.zrange(f"{namespace}:__heartbeats__", 0, -1, withscores=True))
        for key in client.scan_iter(match=f"{namespace}:__acks__*"):
            print("unacked", key, client.smembers(key))
        print("ready:", client.llen(pipeline.clients.keys.ready_queue(settings.queue)))
        raise
    finally:
        for proc in workers:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=30)
        pipeline.close()

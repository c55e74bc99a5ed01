"""A Redis master lost under load (SIGKILLed and failed over by Sentinel, or restarted) loses no change and
applies none twice: a real ``calsync worker`` on a ``redis+sentinel://`` URL follows the master, and the
reconciler's pass re-enqueues what the lost master took with it.

The memory provider logs every call (``calls()``): per target, the versions it applied must rise strictly
(one create; no version twice, none older after a newer one), and its stored event must carry the
event's latest version and title. Prints the time from the failure to the first effect after it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from calsync.core.config.settings import child_environment
from calsync.core.model.vocabulary import DeadLetterCause
from calsync.core.producer.reconcile import reconcile
from calsync.core.store import targets
from calsync.providers.memory import MemoryProvider
from calsync.providers.memory_store import Call
from tests.cli.process import SCRIPT
from tests.integration.sentinel_support import Topology, sentinel_topology
from tests.support import Pipeline, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ACCOUNTS = 3
ENTITIES = 10
VERSIONS = 5
#: The spacing of submits: the load lasts about ENTITIES * VERSIONS * this, long enough to span the failover.
SUBMIT_EVERY = 0.1
EFFECTS = {"created", "updated", "restored"}


def _kill_master(topology: Topology) -> None:
    topology.kill("master")  # the replica is promoted once two sentinels agree it is down


def _restart_master(topology: Topology) -> None:
    topology.kill("master", signal.SIGTERM)  # waits for the replica to catch up, then writes its append-only file
    topology.start_server("master")


def _master_answers(topology: Topology) -> bool:
    port = topology.master_port()
    return port is not None and topology.answers(port)


def _load(pipeline: Pipeline, accounts: list[str], done: list[int], errors: list[str]) -> dict[str, str]:
    """Create ENTITIES events, then update each VERSIONS - 1 times; a refused submit is sent again (as a client
    would). Returns each event's last title."""
    titles: dict[str, str] = {}
    for version in range(VERSIONS):
        for n in range(ENTITIES):
            entity, title = f"evt-{n}", f"event {n} v{version}"
            deadline = time.monotonic() + 30
            while True:
                try:
                    pipeline.submit(accounts, entity_id=entity, title=title)
                    break
                except Exception as exc:
                    errors.append(f"{type(exc).__name__}: {exc}")
                    assert time.monotonic() < deadline, f"submits refused for 30 s: {errors[-1]}"
                    time.sleep(0.2)
            titles[entity] = title
            done.append(1)
            time.sleep(SUBMIT_EVERY)
    return titles


def _applied(calls: list[Call]) -> dict[tuple[str, str], list[tuple[str, int | None]]]:
    applied: dict[tuple[str, str], list[tuple[str, int | None]]] = defaultdict(list)
    for call in calls:
        if call.op == "upsert" and call.effect in EFFECTS:
            applied[(call.account_id, call.entity_id)].append((call.effect, call.version))
    return applied


def _pending(pipeline: Pipeline) -> int:
    with pipeline.clients.db.read() as conn:
        return targets.count_by_status(conn).get("pending", 0)


def _settled(pipeline: Pipeline, seconds: float) -> None:
    """Wait until nothing is pending, or the pending count has not moved for ``seconds`` (lost jobs)."""
    last = (_pending(pipeline), time.monotonic())

    def still() -> bool:
        nonlocal last
        now = _pending(pipeline)
        if now != last[0]:
            last = (now, time.monotonic())
        return now == 0 or time.monotonic() - last[1] >= seconds

    wait_until(still, timeout=60, what="the workers to settle")


@pytest.mark.parametrize("fail", [_kill_master, _restart_master], ids=["killed", "restarted"])
def test_a_lost_master_under_load_loses_and_duplicates_nothing(
    fail: Callable[[Topology], None], settings_factory: Any, tmp_path: Path
) -> None:
    (tmp_path / "redis").mkdir()
    with sentinel_topology(tmp_path / "redis") as topology:
        settings = settings_factory(broker_url=topology.url, redis_url=topology.url)
        provider = MemoryProvider(settings.effective_memory_provider_path)
        pipeline = Pipeline(settings, provider=provider)
        log = tmp_path / "worker.log"
        with open(log, "ab") as out:
            worker = subprocess.Popen(
                [SCRIPT, "worker", "--processes", "1", "--threads", "4"],
                env=child_environment(settings), stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        try:
            accounts = [pipeline.account(account_id=f"acct-{n}") for n in range(ACCOUNTS)]
            done: list[int] = []
            errors: list[str] = []
            titles: dict[str, str] = {}
            load = threading.Thread(target=lambda: titles.update(_load(pipeline, accounts, done, errors)))
            load.start()
            wait_until(lambda: len(done) >= ENTITIES * VERSIONS // 3, timeout=60, what="a third of the load")
            wait_until(lambda: provider.calls(), timeout=30, what="the worker's first effect")
            failed_at = time.time()
            fail(topology)
            wait_until(lambda: _master_answers(topology), timeout=30, what="a master the sentinels name to answer")
            recovered_at = time.time()
            wait_until(
                lambda: [c for c in provider.calls() if c.at > recovered_at and c.error is None],
                timeout=30,
                what="the worker to resume",
            )
            resumed_at = min(c.at for c in provider.calls() if c.at > recovered_at and c.error is None)
            load.join(timeout=60)
            assert not load.is_alive()

            _settled(pipeline, seconds=3)
            requeued = reconcile(pipeline.clients, older_than=0).requeued
            pipeline.wait_idle(timeout=30)

            applied = _applied(provider.calls())
            letters = pipeline.dead_letters()
            rows = {(a, e): pipeline.target(e, a) for a in accounts for e in titles}
            stored = {(s.account_id, s.external_id): s for a in accounts for s in provider.events(a)}
            print(
                f"\n{fail.__name__}: master answering again {recovered_at - failed_at:.2f} s after the failure, "
                f"first effect after {resumed_at - failed_at:.2f} s; {len(errors)} submits refused and sent again; "
                f"the reconciler re-enqueued {len(requeued)} jobs; {len(rows)} targets; {len(letters)} dead letters"
            )
            assert len(stored) == len(rows) == ACCOUNTS * ENTITIES
            for (account, entity), row in rows.items():
                versions = [version or 0 for _, version in applied[(account, entity)]]
                assert [effect for effect, _ in applied[(account, entity)]].count("created") == 1, applied
                assert versions == sorted(set(versions)), f"{account}/{entity}: applied {versions}"
                assert (row.status, row.synced_version) == ("synced", pipeline.event_version(entity))
                event = stored[(account, row.external_id or "")]
                assert (event.body["title"], event.body["version"]) == (titles[entity], row.synced_version)
            # A job whose retry could not be enqueued while no master answered is dead-lettered rather than dropped
            # (core/worker/middleware/retries.py): a record for the operator; its target converged all the same.
            assert {letter.cause for letter in letters} <= {DeadLetterCause.ENQUEUE_FAILED}
        except BaseException:
            print(log.read_text(errors="replace")[-6000:])
            for letter in pipeline.dead_letters():
                print("dead letter:", {k: v for k, v in letter.as_json().items() if not k.startswith("raw_")})
            raise
        finally:
            if worker.poll() is None:
                os.killpg(worker.pid, signal.SIGTERM)
                worker.wait(timeout=30)
            pipeline.close()

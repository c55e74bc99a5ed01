"""A Redis master lost under load (SIGKILLed and failed over by Sentinel, or restarted) loses no change and
applies none twice: a real ``calsync worker`` on a ``redis+sentinel://`` URL follows the master, and the
reconciler's pass re-enqueues what the lost master took with it.

The memory provider logs every call (``calls()``): per target, the versions it applied must rise strictly
(one create; no version twice, none older after a newer one), and its stored event must carry the
event's latest version and title. Prints the time from the failure to the first effect after it.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from calsync.core.config.settings import child_environment
from calsync.core.producer.reconcile import reconcile
from calsync.core.store import targets
from calsync.providers.memory import MemoryProvider
from calsync_emulators.chaos.backends import memory_writes
from calsync_emulators.chaos.invariants import TargetId, duplicate_effects, regressions
from calsync_emulators.chaos.load import Load
from calsync_emulators.harness.sentinel import Topology
from calsync_emulators.harness.workers import start_worker, stop_group
from tests.integration.sentinel_support import sentinel_topology
from tests.support import Pipeline, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ACCOUNTS = 3
ENTITIES = 10
#: The spacing of submits (a round of ENTITIES takes about ENTITIES times this).
SUBMIT_EVERY = 0.1


def _kill_master(topology: Topology) -> None:
    topology.kill("master")  # the replica is promoted once two sentinels agree it is down


def _restart_master(topology: Topology) -> None:
    topology.kill("master", signal.SIGTERM)  # waits for the replica to catch up, then writes its append-only file
    topology.start_server("master")


def _master_answers(topology: Topology) -> bool:
    port = topology.master_port()
    return port is not None and topology.answers(port)


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
        worker = start_worker(child_environment(settings), log, "--processes", "1", "--threads", "4")
        load: Load | None = None
        try:
            accounts = [pipeline.account(account_id=f"acct-{n}") for n in range(ACCOUNTS)]
            # Rounds of submits, a new version of every event each, until stopped: the failure falls inside them.
            load = Load(pipeline.producer, "tenant-1", accounts, [f"evt-{n}" for n in range(ENTITIES)], SUBMIT_EVERY)
            load.start()
            wait_until(lambda: load.submitted >= 2 * ENTITIES, timeout=60, what="two rounds of the load")
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
            load.stop()
            titles = load.titles
            assert len(titles) == ENTITIES, load.refused[-1:]

            _settled(pipeline, seconds=3)
            requeued = reconcile(pipeline.clients, older_than=0).requeued
            pipeline.wait_idle(timeout=30)

            applied = memory_writes(provider.calls())
            letters = pipeline.dead_letters()
            rows = {(a, e): pipeline.target(e, a) for a in accounts for e in titles}
            stored = {(s.account_id, s.external_id): s for a in accounts for s in provider.events(a)}
            print(
                f"\n{fail.__name__}: master answering again {recovered_at - failed_at:.2f} s after the failure, "
                f"first effect after {resumed_at - failed_at:.2f} s; "
                f"{load.submitted} submits ({len(load.refused)} refused and sent again); "
                f"the reconciler re-enqueued {len(requeued)} jobs; {len(rows)} targets; {len(letters)} dead letters"
            )
            assert len(stored) == len(rows) == ACCOUNTS * ENTITIES
            # The chaos run's checks (calsync_emulators/chaos/invariants.py): one create, no version twice, none older.
            assert (duplicate_effects(applied, {}), regressions(applied)) == ([], [])
            for (account, entity), row in rows.items():
                assert sum(1 for w in applied if w.target == TargetId(account, entity) and w.effect == "created") == 1
                assert (row.status, row.synced_version) == ("synced", pipeline.event_version(entity))
                event = stored[(account, row.external_id or "")]
                assert (event.body["title"], event.body["version"]) == (titles[entity], row.synced_version)
            # A job whose retry could not be enqueued while no master answered is owed to the reconciler (its target
            # marked "not enqueued", core/worker/middleware/retries.py), not dead-lettered: nothing for an operator.
            assert letters == []
        except BaseException:
            print(log.read_text(errors="replace")[-6000:])
            for letter in pipeline.dead_letters():
                print("dead letter:", {k: v for k, v in letter.as_json().items() if not k.startswith("raw_")})
            raise
        finally:
            if load is not None:
                load.stop()
            stop_group(worker, timeout=30)
            pipeline.close()

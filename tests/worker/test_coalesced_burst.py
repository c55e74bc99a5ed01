"""A burst of edits, coalesced by the coalesce window, through real worker threads: the newest wins, few writes."""

from __future__ import annotations

import collections
from typing import Any

from tests.support import Pipeline, wait_until

WINDOW = 3.0  # far longer than the burst takes to submit: every edit after the first finds its target coalescing
EDITS = 10


def _burst(pipeline: Pipeline, accounts: list[str]) -> str:
    entity = pipeline.submit(accounts, title="v1").entity_id
    for n in range(2, EDITS + 1):
        pipeline.submit(None, entity_id=entity, title=f"v{n}")
    return entity


def _settled(pipeline: Pipeline, entity: str, accounts: list[str]) -> collections.Counter[str]:
    """Wait until the newest version is at the provider everywhere and every job has ended; writes per account."""

    def newest_everywhere() -> bool:
        done = {c.account_id for c in pipeline.provider.calls() if c.entity_id == entity and c.version == EDITS}
        return done == set(accounts)

    wait_until(newest_everywhere, what=f"version {EDITS} in every account")
    ended = ("success", "stale", "already_done")
    wait_until(lambda: sum(pipeline.outcomes().get(o, 0) for o in ended) == EDITS * len(accounts),
               what="every job of the burst to end")  # fmt: skip
    for account in accounts:
        assert [e.body["title"] for e in pipeline.provider.events(account)] == [f"v{EDITS}"]
    return collections.Counter(c.account_id for c in pipeline.provider.calls() if c.entity_id == entity)


def test_with_the_worker_running_a_burst_writes_at_most_twice_per_account(settings_factory: Any) -> None:
    pipeline = Pipeline(settings_factory(coalesce_window=WINDOW))
    try:
        accounts = [pipeline.account(account_id=f"acc-{n}") for n in range(4)]
        with pipeline.worker(threads=4):
            entity = _burst(pipeline, accounts)
            writes = _settled(pipeline, entity, accounts)
        assert set(writes) == set(accounts) and max(writes.values()) <= 2
        assert pipeline.outcomes().get("lock_busy", 0) == 0  # the newest job never met the first write's lock
    finally:
        pipeline.close()


def test_a_burst_queued_before_the_worker_starts_writes_once_per_account(settings_factory: Any) -> None:
    pipeline = Pipeline(settings_factory(coalesce_window=WINDOW))
    try:
        accounts = [pipeline.account(account_id=f"acc-{n}") for n in range(4)]
        entity = _burst(pipeline, accounts)
        with pipeline.worker(threads=4):
            writes = _settled(pipeline, entity, accounts)
        assert writes == {account: 1 for account in accounts}
        assert pipeline.outcomes() == {"success": len(accounts), "stale": (EDITS - 1) * len(accounts)}
    finally:
        pipeline.close()

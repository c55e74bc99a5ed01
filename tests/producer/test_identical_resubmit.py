"""What README.md promises for an identical resubmit once its jobs are done: the same entity and version, no
new version, and no job ids (nothing is pending any more)."""

from __future__ import annotations

from tests.support import Pipeline


def test_an_identical_resubmit_after_the_jobs_finished_returns_no_job_ids(pipeline: Pipeline) -> None:
    account = pipeline.account()
    first = pipeline.submit([account], title="Standup")
    with pipeline.worker():
        pipeline.wait_target(first.entity_id, account, "synced")
    again = pipeline.submit([account], entity_id=first.entity_id, title="Standup")
    assert (again.entity_id, again.version, again.job_ids, again.deferred_accounts) == (first.entity_id, 1, [], [])
    assert pipeline.event_version(first.entity_id) == 1

"""``accounts remove`` through the producer and real worker threads: detaching plans a delete of the event from that
account only, as a change leaving the account out would; nothing can put an event back into an account being
removed; the account goes once every delete is done."""

from __future__ import annotations

import pytest

from calsync.core.model.errors import InvalidChange
from calsync.core.producer.account_removal import remove_account
from calsync.core.store import accounts
from calsync.core.store.pruning import Retention, prune
from tests.support import Pipeline

QUIET = Retention(batch=100, max_batches=10, dead_letters=0, cancelled_events=0, removal_quiet=0)


def _status(pipeline: Pipeline, account_id: str) -> str | None:
    with pipeline.clients.db.read() as conn:
        found = accounts.get_summary(conn, account_id)
    return found.status if found else None


def _shown(pipeline: Pipeline, account_id: str) -> int:
    """Events the account's calendar shows (a deleted one stays in the memory calendar as cancelled)."""
    return sum(event.status != "cancelled" for event in pipeline.provider.events(account_id))


def _effects(pipeline: Pipeline, account_id: str) -> list[str]:
    return [call.effect for call in pipeline.provider.calls() if call.account_id == account_id and call.effect]


def _unseen(_detached: int) -> None:
    """No progress bar: the command's terminal is not these tests' concern."""


def test_detaching_deletes_the_event_from_that_account_only_and_then_the_account_goes(pipeline: Pipeline) -> None:
    gone, kept = pipeline.account(account_id="gone"), pipeline.account(account_id="kept")
    receipt = pipeline.submit([gone, kept])
    with pipeline.worker():
        pipeline.wait_idle()
        report = remove_account(pipeline.clients.db, pipeline.producer, gone, quiet_seconds=0, progress=_unseen)
        assert (report.status, report.detached_events, len(report.job_ids)) == ("removing", 1, 1)
        pipeline.wait_target(receipt.entity_id, gone, "deleted")
    assert pipeline.event_version(receipt.entity_id) == 2
    assert pipeline.target(receipt.entity_id, kept).synced_version == 1  # not written again: nothing changed there
    assert _effects(pipeline, gone) == ["created", "deleted"] and _effects(pipeline, kept) == ["created"]
    assert (_shown(pipeline, gone), _shown(pipeline, kept)) == (0, 1)
    assert prune(pipeline.clients.db, QUIET).purged["provider_accounts"] == 1
    assert _status(pipeline, gone) is None and _status(pipeline, kept) == "active"


def test_an_account_with_events_is_refused_without_detach_and_nothing_changes(pipeline: Pipeline) -> None:
    account = pipeline.account(account_id="busy")
    pipeline.submit([account])
    with pytest.raises(InvalidChange, match=r"still has 1 event\(s\) .*`calsync accounts remove busy --detach`"):
        remove_account(pipeline.clients.db, None, account, quiet_seconds=0, progress=_unseen)
    assert _status(pipeline, account) == "active"
    idle = pipeline.account(account_id="idle")
    assert remove_account(pipeline.clients.db, None, idle, quiet_seconds=0, progress=_unseen).status == "removed"
    assert _status(pipeline, idle) is None


def test_a_change_naming_an_account_being_removed_is_refused(pipeline: Pipeline) -> None:
    account = pipeline.account(account_id="leaving")
    pipeline.submit([account])  # no worker: its delete stays to be done, so the account stays
    remove_account(pipeline.clients.db, pipeline.producer, account, quiet_seconds=0, progress=_unseen)
    assert _status(pipeline, account) == "removing"
    with pytest.raises(InvalidChange, match="accounts: account leaving is being removed"):
        pipeline.submit([account])


def test_a_change_that_raced_the_removal_cannot_put_the_event_back(pipeline: Pipeline) -> None:
    account = pipeline.account(account_id="raced")
    first = pipeline.submit([account])
    with pipeline.worker():
        pipeline.wait_idle()
    edit = pipeline.submit([account], entity_id=first.entity_id, title="Edited")  # checked while still active
    with pipeline.clients.db.write() as conn:  # ... and marked removing before its job runs
        accounts.update_account(conn, account, status="removing")
    with pipeline.worker():
        pipeline.wait_target(first.entity_id, account, "deleted")
    assert edit.version == 2 and _effects(pipeline, account) == ["created", "deleted"]
    assert _shown(pipeline, account) == 0


def test_detaching_again_plans_nothing_new_and_pending_siblings_follow_the_new_version(pipeline: Pipeline) -> None:
    gone, kept = pipeline.account(account_id="gone"), pipeline.account(account_id="kept")
    receipt = pipeline.submit([gone, kept])  # no worker yet: both targets pending at version 1
    first = pipeline.producer.detach("tenant-1", receipt.entity_id, gone)
    again = pipeline.producer.detach("tenant-1", receipt.entity_id, gone)
    assert (first.version, len(first.job_ids)) == (2, 2) and (again.version, again.job_ids) == (2, [])
    assert pipeline.target(receipt.entity_id, kept).wanted_version == 2  # its version-1 job is stale now
    with pipeline.worker():
        pipeline.wait_idle()
    assert (_shown(pipeline, gone), _shown(pipeline, kept)) == (0, 1)
    assert _effects(pipeline, kept) == ["created"]

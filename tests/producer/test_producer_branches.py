"""The producer's branches on a SQLite file, with in-memory enqueue markers and queue: no Redis, no broker."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from calsync.core.model.errors import CalsyncError, EntityNotFound, InvalidChange
from calsync.core.producer.receipts import Receipt
from calsync.core.producer.submit import Intake
from calsync.core.store import accounts, migrate, targets
from calsync.core.store.database import Database
from calsync.core.store.targets import TargetKey, TargetRow
from tests.producer.fakes import MemoryMarkers, MemoryQueue
from tests.support import change

TENANT = "tenant-1"
EVENT = "evt-1"


def _key(account_id: str, operation: str, version: int | None = None) -> str:
    suffix = operation if version is None else f"{operation}:v{version}"
    return f"calendar:{TENANT}:{EVENT}:{account_id}:{suffix}"


class Harness:
    """An intake on its own SQLite file, with the fakes it enqueues into."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.markers = MemoryMarkers()
        self.queue = MemoryQueue()
        self.intake = Intake(db, self.markers, self.queue, default_send_updates="none")

    def account(self, account_id: str, tenant: str = TENANT) -> str:
        with self.db.write() as conn:
            return accounts.add_account(conn, tenant_id=tenant, provider="memory", address=f"{account_id}@example.com",
                                        credentials=None, options={}, account_id=account_id).id  # fmt: skip

    def submit(self, accounts_: list[str] | None, **kw: Any) -> Receipt:
        return self.intake.submit(TENANT, change(accounts_, entity_id=EVENT, **kw))

    def target(self, account_id: str) -> TargetRow:
        with self.db.read() as conn:
            row = targets.get_target(conn, TargetKey(TENANT, EVENT, account_id))
        assert row is not None
        return row

    def synced(self, account_id: str, version: int, *, deleted: bool = False) -> None:
        """Record what a worker would after a successful sync."""
        with self.db.write() as tx:
            assert targets.record_synced(tx, TargetKey(TENANT, EVENT, account_id), version=version,
                                         external_id=f"ext-{account_id}", etag=None,
                                         final_status="deleted" if deleted else "synced")  # fmt: skip


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Harness]:
    db = Database(f"sqlite:///{tmp_path / 'producer.sqlite3'}")
    migrate.migrate_to(db)
    built = Harness(db)
    built.account("acc-a")
    built.account("acc-b")
    yield built
    db.dispose()


def test_a_new_event_creates_one_job_per_account(harness: Harness) -> None:
    receipt = harness.submit(["acc-a", "acc-b"])
    assert (receipt.entity_id, receipt.version, receipt.deferred_accounts) == (EVENT, 1, [])
    assert receipt.job_ids == [p.job_id for p in harness.queue.payloads]
    assert harness.queue.jobs() == {"acc-a": ("create", _key("acc-a", "create")),
                                    "acc-b": ("create", _key("acc-b", "create"))}  # fmt: skip
    assert {p.target_version for p in harness.queue.payloads} == {1}
    row = harness.target("acc-a")
    assert (row.wanted, row.wanted_version, row.status) == ("present", 1, "pending")


def test_an_edit_updates_every_target_at_the_new_version(harness: Harness) -> None:
    harness.submit(["acc-a", "acc-b"])
    harness.synced("acc-a", 1)
    receipt = harness.submit(None, title="Moved")
    assert receipt.version == 2
    assert harness.queue.jobs() == {"acc-a": ("update", _key("acc-a", "update", 2)),
                                    "acc-b": ("update", _key("acc-b", "update", 2))}  # fmt: skip
    assert receipt.job_ids == [p.job_id for p in harness.queue.payloads[2:]]
    assert harness.target("acc-b").wanted_version == 2


def test_a_delete_removes_every_target_once(harness: Harness) -> None:
    harness.submit(["acc-a", "acc-b"])
    receipt = harness.submit(None, operation="delete")
    assert receipt.version == 2 and len(receipt.job_ids) == 2
    assert harness.queue.jobs() == {"acc-a": ("delete", _key("acc-a", "delete", 2)),
                                    "acc-b": ("delete", _key("acc-b", "delete", 2))}  # fmt: skip
    enqueued = len(harness.queue.payloads)
    again = harness.submit(None, operation="delete")
    assert (again.version, again.job_ids) == (2, [])
    assert len(harness.queue.payloads) == enqueued


def test_an_added_account_gets_its_create_and_the_others_an_update(harness: Harness) -> None:
    harness.submit(["acc-a"])
    receipt = harness.submit(["acc-a", "acc-b"])
    assert receipt.version == 2
    assert harness.queue.jobs() == {"acc-a": ("update", _key("acc-a", "update", 2)),
                                    "acc-b": ("create", _key("acc-b", "create"))}  # fmt: skip


def test_a_removed_account_gets_a_delete_and_is_left_alone_once_deleted(harness: Harness) -> None:
    harness.submit(["acc-a", "acc-b"])
    receipt = harness.submit(["acc-a"])
    assert receipt.version == 2
    assert harness.queue.jobs() == {"acc-a": ("update", _key("acc-a", "update", 2)),
                                    "acc-b": ("delete", _key("acc-b", "delete", 2))}  # fmt: skip
    assert (harness.target("acc-b").wanted, harness.target("acc-b").wanted_version) == ("absent", 2)
    harness.synced("acc-b", 2, deleted=True)
    before = len(harness.queue.payloads)
    harness.submit(["acc-a"], title="Later edit")
    assert [(p.account_id, p.operation) for p in harness.queue.payloads[before:]] == [("acc-a", "update")]


def test_an_account_added_back_after_its_delete_is_updated_not_created_again(harness: Harness) -> None:
    harness.submit(["acc-a", "acc-b"])
    harness.submit(["acc-a"])
    harness.synced("acc-b", 2, deleted=True)
    harness.submit(["acc-a", "acc-b"])
    assert harness.queue.jobs()["acc-b"] == ("update", _key("acc-b", "update", 3))
    assert harness.target("acc-b").wanted == "present"


@pytest.mark.parametrize("edited", [False, True], ids=["create", "update"])
def test_an_identical_resubmit_makes_no_version_and_returns_the_same_jobs(harness: Harness, edited: bool) -> None:
    title = "Moved" if edited else "Planning"
    first = harness.submit(["acc-a", "acc-b"])
    if edited:
        first = harness.submit(["acc-a", "acc-b"], title=title)
    enqueued = len(harness.queue.payloads)
    again = harness.submit(["acc-a", "acc-b"], title=title)
    assert again == first
    assert len(harness.queue.payloads) == enqueued


def test_an_identical_resubmit_of_a_synced_event_enqueues_nothing(harness: Harness) -> None:
    harness.submit(["acc-a"])
    harness.synced("acc-a", 1)
    again = harness.submit(["acc-a"])
    assert (again.version, again.job_ids) == (1, [])
    assert len(harness.queue.payloads) == 1


def test_a_failed_enqueue_is_deferred_and_the_retry_enqueues_it(harness: Harness) -> None:
    harness.queue.failing = True
    receipt = harness.submit(["acc-a"])
    assert (receipt.version, receipt.job_ids, receipt.deferred_accounts) == (1, [], ["acc-a"])
    assert harness.target("acc-a").status == "pending" and harness.markers.marks == {}
    harness.queue.failing = False
    retry = harness.submit(["acc-a"])
    assert (retry.version, retry.deferred_accounts) == (1, [])
    assert retry.job_ids == [p.job_id for p in harness.queue.payloads]
    assert harness.queue.jobs() == {"acc-a": ("update", _key("acc-a", "update", 1))}  # the worker creates from state


def _disable(harness: Harness, account_id: str) -> None:
    with harness.db.write() as conn:
        accounts.update_account(conn, account_id, status="disabled")


@pytest.mark.parametrize(
    ("prepare", "submission", "error", "complaint"),
    [
        (None, {"accounts_": None, "operation": "delete"}, EntityNotFound, f"event {EVENT} does not exist"),
        (None, {"accounts_": None}, InvalidChange, "accounts: required when creating an event"),
        (None, {"accounts_": ["acc-other"]}, InvalidChange, "account acc-other does not exist for tenant"),
        (lambda h: _disable(h, "acc-b"), {"accounts_": ["acc-b"]}, InvalidChange, "account acc-b is disabled"),
    ],
)
def test_refused_changes_save_nothing_and_enqueue_nothing(
    harness: Harness, prepare: Any, submission: dict[str, Any], error: type[CalsyncError], complaint: str
) -> None:
    harness.account("acc-other", tenant="tenant-2")
    if prepare is not None:
        prepare(harness)
    with pytest.raises(error, match=complaint):
        harness.submit(**submission)
    assert harness.queue.payloads == []
    with harness.db.read() as conn:
        assert targets.list_targets(conn, TENANT, EVENT) == []


def test_an_invalid_tenant_id_is_refused(harness: Harness) -> None:
    with pytest.raises(InvalidChange, match="tenant_id"):
        harness.intake.submit("tenant:1", change(["acc-a"]))

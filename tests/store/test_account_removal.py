"""An account being removed: what is left in its calendar, and its row gone only once every target is deleted and
quiet, with its targets and create keys (so the same id registered again creates its events afresh)."""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import func, select

from calsync.core.model.payload import idempotency_key
from calsync.core.store import account_removal, accounts, events, idempotency, targets
from calsync.core.store.database import Database
from calsync.core.store.pruning import Retention, prune
from calsync.core.store.schema import event_targets
from calsync.core.store.targets import TargetKey
from tests.store.test_pruning import FIELDS, account, event, synced, utcnow
from tests.support import plan_target

pytestmark = pytest.mark.both_databases

QUIET = 120.0
RETENTION = Retention(batch=100, max_batches=10, dead_letters=0, cancelled_events=0, removal_quiet=QUIET)


def _left(db: Database, account_id: str) -> account_removal.Left:
    with db.read() as conn:
        return account_removal.left_in(conn, account_id)


def _exists(db: Database, account_id: str) -> bool:
    with db.read() as conn:
        return accounts.get_summary(conn, account_id) is not None


def _removing(db: Database, account_id: str) -> None:
    with db.write() as conn:
        accounts.update_account(conn, account_id, status="removing")


def _deleted(db: Database, key: TargetKey, version: int) -> None:
    with db.write() as conn:
        plan_target(conn, key, wanted="absent", version=version, due_at=utcnow())
    synced(db, key, version, final="deleted", op="delete")


def test_what_is_left_counts_events_still_wanting_the_account_apart_from_deletes_to_come(db: Database) -> None:
    gone, kept = account(db, "gone"), account(db, "kept")
    event(db, "e1", [gone, kept])
    event(db, "e2", [gone])
    [cancelled] = event(db, "e3", [gone])
    with db.write() as conn:  # e3 cancelled: its delete is still to run
        events.bump_event(conn, "t", "e3", status="cancelled", send_updates="none")
        plan_target(conn, cancelled, wanted="present", version=2, due_at=utcnow())
    assert _left(db, gone) == account_removal.Left(targets=3, to_detach=2)
    with db.read() as conn:
        assert account_removal.events_to_detach(conn, gone, after=None, limit=1) == ["e1"]
        assert account_removal.events_to_detach(conn, gone, after="e1", limit=10) == ["e2"]


def test_the_row_goes_only_when_every_target_is_deleted_and_quiet(db: Database) -> None:
    gone, kept = account(db, "gone"), account(db, "kept")
    [key, other] = event(db, "e1", [gone, kept])
    _removing(db, gone)
    with db.write() as conn:
        assert not account_removal.remove_if_done(conn, gone, quiet_since=utcnow())  # a target is left
    _deleted(db, key, 2)
    with db.write() as conn:  # deleted, but a re-run of its delete may still come within the quiet period
        assert not account_removal.remove_if_done(conn, gone, quiet_since=utcnow() - dt.timedelta(seconds=QUIET))
    with db.write() as conn:
        assert account_removal.remove_if_done(conn, gone, quiet_since=utcnow() + dt.timedelta(seconds=1))
    assert not _exists(db, gone) and _exists(db, kept)
    with db.read() as conn:
        assert targets.get_target(conn, key) is None and targets.get_target(conn, other) is not None
        assert not idempotency.succeeded(conn, idempotency_key(*key, "create", 1))  # the same id creates afresh
        assert idempotency.succeeded(conn, idempotency_key(*other, "create", 1))


def test_the_housekeeping_pass_removes_an_account_being_removed_once_quiet(db: Database) -> None:
    gone, idle, active = account(db, "gone"), account(db, "idle"), account(db, "active")
    [key] = event(db, "e1", [gone])
    _removing(db, gone)
    _removing(db, idle)  # no target at all
    _deleted(db, key, 2)
    now = utcnow()
    first = prune(db, RETENTION, now=now)
    assert first.purged["provider_accounts"] == 1 and not _exists(db, idle) and _exists(db, gone)
    later = prune(db, RETENTION, now=now + dt.timedelta(seconds=QUIET + 1))
    assert later.purged["provider_accounts"] == 1 and not _exists(db, gone) and _exists(db, active)
    with db.read() as conn:
        assert conn.execute(select(func.count()).select_from(event_targets)).scalar() == 0
        assert events.get_event(conn, "t", "e1") is not None  # the event itself stays (its other accounts, later)


def test_an_account_not_being_removed_is_never_pruned(db: Database) -> None:
    quiet = account(db, "quiet")
    with db.write() as conn:
        events.insert_event(conn, "t", "e1", FIELDS, "none")
    prune(db, RETENTION, now=utcnow() + dt.timedelta(days=365))
    assert _exists(db, quiet)

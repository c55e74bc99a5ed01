"""``event_targets.create_attempted``: unknown counts as sent, only a brand-new target says "none sent", never cleared.

The Exchange adapter skips its lookup before a create only when the target says no create was ever
sent, so every way a row can come to say so is pinned here, on both backends.
"""

from __future__ import annotations

import datetime as dt

import pytest
import sqlalchemy as sa

from calsync.core.model.change import EventFields
from calsync.core.store import accounts, events, migrate, targets
from calsync.core.store.database import Database
from calsync.core.store.targets import TargetKey
from tests.support import plan_target

pytestmark = pytest.mark.both_databases

_BEFORE = "0006"  # the last revision without the column


def _event_and_account(db: Database, event_id: str = "e1", provider: str = "exchange") -> TargetKey:
    with db.write() as conn:
        account = accounts.add_account(conn, tenant_id="t", provider=provider, address=f"{event_id}@b.c",  # type: ignore[arg-type]
                                       credentials=None, options={})  # fmt: skip
        fields = EventFields(title="x", start=dt.datetime(2026, 1, 1, 9, tzinfo=dt.UTC),
                             end=dt.datetime(2026, 1, 1, 10, tzinfo=dt.UTC))  # fmt: skip
        events.insert_event(conn, "t", event_id, fields, "none")
    return TargetKey("t", event_id, account.id)


def _event_and_account_as_the_previous_release(db: Database, event_id: str) -> TargetKey:
    # An old schema: the account with only the columns every revision has (this code's also writes calendar_key).
    columns = "id, tenant_id, provider, address, options, status, created_at, updated_at"
    with db.engine.begin() as conn:
        conn.execute(
            sa.text(f"INSERT INTO provider_accounts ({columns}) "
                    "VALUES (:a, 't', 'exchange', :address, '{}', 'active', :now, :now)"),
            {"a": f"acc-{event_id}", "address": f"{event_id}@b.c", "now": dt.datetime(2026, 1, 1)},
        )  # fmt: skip
        fields = EventFields(title="x", start=dt.datetime(2026, 1, 1, 9, tzinfo=dt.UTC),
                             end=dt.datetime(2026, 1, 1, 10, tzinfo=dt.UTC))  # fmt: skip
        events.insert_event(conn, "t", event_id, fields, "none")
    return TargetKey("t", event_id, f"acc-{event_id}")


def _planned(db: Database, event_id: str = "e1") -> TargetKey:
    key = _event_and_account(db, event_id)
    with db.write() as conn:
        plan_target(conn, key, wanted="present", version=1, due_at=dt.datetime.now(dt.UTC))
    return key


def _row(db: Database, key: TargetKey) -> targets.TargetRow:
    with db.read() as conn:
        row = targets.get_target(conn, key)
    assert row is not None
    return row


def _insert_as_the_previous_release(db: Database, key: TargetKey) -> None:
    # The previous release's producer names only the columns it knows.
    columns = "tenant_id, event_id, account_id, wanted, wanted_version, synced_version, status, updated_at"
    with db.engine.begin() as conn:
        conn.execute(
            sa.text(f"INSERT INTO event_targets ({columns}) VALUES (:t, :e, :a, 'present', 1, 0, 'pending', :now)"),
            {"t": key.tenant_id, "e": key.event_id, "a": key.account_id, "now": dt.datetime(2026, 1, 1)},
        )


def test_a_target_the_producer_creates_says_no_create_was_sent(db: Database) -> None:
    one = _planned(db, "e1")
    many = _event_and_account(db, "e2")
    with db.write() as conn:
        targets.plan_targets(conn, [(many, "present")], version=1, due_at=dt.datetime.now(dt.UTC), existing=())
    for key in (one, many):
        row = _row(db, key)
        assert row.create_attempted is False and row.view().create_attempted is False


def test_rows_from_before_the_migration_or_from_the_previous_release_count_as_maybe_sent(db: Database) -> None:
    migrate.migrate_to(db, _BEFORE)
    before = _event_and_account_as_the_previous_release(db, "e1")
    _insert_as_the_previous_release(db, before)
    migrate.migrate_to(db)
    after = _event_and_account(db, "e2")
    _insert_as_the_previous_release(db, after)  # a previous-release producer during the roll-out
    assert _row(db, before).create_attempted is True
    assert _row(db, after).create_attempted is True


def test_a_downgrade_drops_the_column_and_the_upgrade_counts_every_row_as_maybe_sent(db: Database) -> None:
    key = _planned(db)
    assert _row(db, key).create_attempted is False
    migrate.migrate_to(db, _BEFORE)
    with db.engine.connect() as conn:
        assert "create_attempted" not in {c["name"] for c in sa.inspect(conn).get_columns("event_targets")}
    migrate.migrate_to(db)  # the previous release may have sent creates meanwhile
    assert _row(db, key).create_attempted is True


def test_the_marker_is_never_cleared_by_planning_syncing_or_failing(db: Database) -> None:
    key = _planned(db)
    with db.write() as tx:
        targets.mark_create_attempted(tx, key)
    now = dt.datetime.now(dt.UTC)
    with db.write() as conn:
        targets.record_retry(conn, key, version=1, error_class="ProviderTimeout", message="lost", due_at=now)
        plan_target(conn, key, wanted="present", version=2, due_at=now)
    with db.write() as tx:
        targets.record_synced(tx, key, version=2, external_id="x", etag="e", final_status="synced")
    with db.write() as conn:
        plan_target(conn, key, wanted="absent", version=3, due_at=now)
        targets.record_failed(conn, key, version=3, error_class="Forbidden", message="no")
        targets.reopen(conn, key, due_at=now, job_id="replayed")
    assert _row(db, key).create_attempted is True


def test_a_recorded_failure_counts_as_an_earlier_attempt(db: Database) -> None:
    key = _planned(db)
    with db.write() as conn:  # the previous release's retry middleware, after its create timed out
        targets.record_retry(conn, key, version=1, error_class="ProviderTimeout", message="lost",
                             due_at=dt.datetime.now(dt.UTC))  # fmt: skip
    row = _row(db, key)
    assert row.create_attempted is False and row.view().create_attempted is True


@pytest.mark.parametrize("provider", [None, "graph"])
def test_moving_an_account_to_another_adapter_marks_its_targets(db: Database, provider: str | None) -> None:
    key = _planned(db)
    with db.write() as conn:
        accounts.update_account(conn, key.account_id, status="active", provider=provider)  # type: ignore[arg-type]
    assert _row(db, key).create_attempted is (provider is not None)

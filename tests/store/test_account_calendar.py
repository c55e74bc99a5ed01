"""One account per calendar and tenant, kept by the database itself (migration 0008), on both backends."""

from __future__ import annotations

import datetime as dt
import logging
import threading
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError

from calsync.core.model.calendar import ProviderName
from calsync.core.model.errors import InvalidChange
from calsync.core.store import accounts, migrate
from calsync.core.store.database import Database
from calsync.core.store.schema import provider_accounts

pytestmark = pytest.mark.both_databases

_EWS = {"auth_type": "basic", "server_url": "https://mail.example.com/EWS/Exchange.asmx"}


def _add(db: Database, provider: ProviderName, address: str, tenant: str = "t", **options: Any) -> str:
    with db.write() as conn:
        return accounts.add_account(conn, tenant_id=tenant, provider=provider, address=address, credentials=None,
                                    options=options).id  # fmt: skip


def test_the_same_mailbox_over_ews_and_graph_is_refused_naming_the_first(db: Database) -> None:
    first = _add(db, "exchange", "Alice@Example.com", **_EWS)
    with pytest.raises(InvalidChange, match=rf"^account {first} \(exchange, Alice@Example.com\) of tenant t already "):
        _add(db, "graph", "alice@example.com")
    _add(db, "graph", "alice@example.com", tenant="other")  # another tenant's own account of that mailbox
    _add(db, "graph", "alice@example.com", calendar="AAMk=")  # another calendar of the mailbox
    _add(db, "memory", "alice@example.com")
    _add(db, "memory", "alice@example.com")  # a memory account is its own calendar
    with db.read() as conn:
        assert [a.calendar_key for a in accounts.list_accounts(conn, "t")] == [
            "exchange:alice@example.com", "exchange:alice@example.com/AAMk=", None, None]  # fmt: skip


def test_the_database_refuses_a_second_account_of_a_calendar_that_no_check_saw(db: Database) -> None:
    """Two registrations at once each check before the other commits: the unique index refuses the second."""
    _add(db, "google", "team@group.calendar.google.com")
    now = dt.datetime.now(dt.UTC)
    row = {"id": "acc_twin", "tenant_id": "t", "provider": "google", "address": "alice@example.com", "options": {},
           "status": "active", "created_at": now, "updated_at": now,
           "calendar_key": "google:team@group.calendar.google.com"}  # fmt: skip
    with pytest.raises(IntegrityError), db.write() as conn:
        conn.execute(sa.insert(provider_accounts).values(**row))


@pytest.mark.postgresql_only  # SQLite has one writer at a time: the second's check sees the first's insert
def test_of_two_concurrent_registrations_of_one_mailbox_one_wins(db: Database) -> None:
    outcomes: list[str] = []
    barrier = threading.Barrier(2)

    def register(provider: ProviderName) -> None:
        try:
            with db.write() as conn:
                accounts.check_calendar_free(conn, "t", "exchange:alice@example.com")
                barrier.wait(timeout=10)  # both checked, neither committed: the index alone decides
                accounts.add_account(conn, tenant_id="t", provider=provider, address="alice@example.com",
                                     credentials=None, options=_EWS if provider == "exchange" else {})  # fmt: skip
            outcomes.append("added")
        except (IntegrityError, InvalidChange) as exc:
            outcomes.append(type(exc).__name__)

    threads = [threading.Thread(target=register, args=(p,)) for p in ("exchange", "graph")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    # The loser is refused by the unique index (IntegrityError) or, when the winner committed before the loser's
    # insert re-checked, by that check (InvalidChange): either way exactly one account holds the calendar.
    assert sorted(outcomes) in (["IntegrityError", "added"], ["InvalidChange", "added"])
    with db.read() as conn:
        assert [a.calendar_key for a in accounts.list_accounts(conn, "t")] == ["exchange:alice@example.com"]


def test_an_update_cannot_point_an_account_at_a_calendar_another_holds(db: Database) -> None:
    _add(db, "google", "alice@example.com")
    bob = _add(db, "google", "bob@example.com")
    with pytest.raises(InvalidChange, match="already writes into this calendar"), db.write() as conn:
        accounts.update_account(conn, bob, options={"calendar_id": "alice@example.com"})
    with db.write() as conn:
        moved = accounts.update_account(conn, bob, options={"calendar_id": "team@group.calendar.google.com"})
    assert moved.calendar_key == "google:team@group.calendar.google.com"
    ews = _add(db, "exchange", "carol@example.com", **_EWS)
    with db.write() as conn:  # EWS → Graph: the same mailbox, its own calendar still
        assert accounts.update_account(conn, ews, provider="graph", options={}).calendar_key == (
            "exchange:carol@example.com"
        )


def test_the_migration_keys_existing_accounts_and_leaves_a_duplicate_unchecked(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    migrate.migrate_to(db, "0007")
    columns = "id, tenant_id, provider, address, options, status, created_at, updated_at"
    rows = [("acc_1", "exchange", "Alice@example.com", dt.datetime(2026, 1, 1)),
            ("acc_2", "graph", "alice@example.com", dt.datetime(2026, 1, 2)),
            ("acc_3", "graph", "bob@example.com", dt.datetime(2026, 1, 3))]  # fmt: skip
    with db.engine.begin() as conn:
        for account_id, provider, address, created in rows:
            conn.execute(sa.text(f"INSERT INTO provider_accounts ({columns}) "
                                 "VALUES (:id, 't', :p, :a, '{}', 'active', :c, :c)"),
                         {"id": account_id, "p": provider, "a": address, "c": created})  # fmt: skip
    with caplog.at_level(logging.WARNING):
        migrate.migrate_to(db)
    with db.read() as conn:
        keys = {a.id: a.calendar_key for a in accounts.list_accounts(conn)}
    assert keys == {"acc_1": "exchange:alice@example.com", "acc_2": None, "acc_3": "exchange:bob@example.com"}
    assert any("acc_1 and acc_2 of tenant t write into the same calendar" in r.getMessage() for r in caplog.records)
    migrate.migrate_to(db, "0007")  # and back: the column and index go, the accounts stay
    with db.engine.connect() as conn:
        assert "calendar_key" not in {c["name"] for c in sa.inspect(conn).get_columns("provider_accounts")}
        assert conn.execute(sa.text("SELECT count(*) FROM provider_accounts")).scalar() == 3

"""The hot path's direct driver access gives exactly what SQLAlchemy gives, on both backends."""

from __future__ import annotations

import datetime as dt
import threading
from pathlib import Path

import pytest
from sqlalchemy import bindparam, func, select, text, update

from calsync.core.model.change import EventFields
from calsync.core.model.errors import StoreUnavailable
from calsync.core.model.payload import new_payload
from calsync.core.store import accounts, events, idempotency, targets
from calsync.core.store.crypto import CredentialCipher
from calsync.core.store.database import Database
from calsync.core.store.direct import DirectConnections, DirectStatement
from calsync.core.store.schema import event_targets
from calsync.core.store.schema import events as events_table
from calsync.core.store.targets import TargetKey
from calsync.core.worker.snapshot import _JOINED, load_snapshot

pytestmark = pytest.mark.both_databases

_START = dt.datetime(2026, 3, 29, 0, 30, tzinfo=dt.UTC)


def _planned(db: Database, *, account_options: dict[str, object] | None = None) -> TargetKey:
    with db.write() as conn:
        account = accounts.add_account(conn, tenant_id="t", provider="memory", address="a@b.c", credentials=None,
                                       options=account_options or {})  # fmt: skip
        fields = EventFields(title="Zoë's review", start=_START, end=_START + dt.timedelta(hours=1),
                             attendees=("a@example.com", "b@example.com"), description=None)  # fmt: skip
        events.insert_event(conn, "t", "e1", fields, "all")
        key = TargetKey("t", "e1", account.id)
        targets.plan_target(conn, key, wanted="present", version=1, due_at=_START)
    return key


def test_a_select_returns_the_same_row_as_through_sqlalchemy(db: Database) -> None:
    key = _planned(db, account_options={"calendar": "primary", "n": 2})
    params = {"k_tenant": key.tenant_id, "k_event": key.event_id, "k_account": key.account_id,
              "k_idempotency": "none", "k_now": dt.datetime.now(dt.UTC)}  # fmt: skip
    with db.read() as conn:
        expected = dict(conn.execute(_JOINED, params).mappings().one())
    with db.direct_read() as tx:
        [row] = tx.execute(DirectStatement(_JOINED), params).rows
    assert row == expected
    # Values come back converted, not as the driver's raw strings: aware datetimes, JSON, booleans.
    assert row["t_due_at"] == _START and row["a_options"] == {"calendar": "primary", "n": 2}
    assert row["e_attendees"] == ["a@example.com", "b@example.com"] and row["e_all_day"] is False


def test_bind_parameters_are_converted_and_literals_kept(db: Database) -> None:
    key = _planned(db)
    later = _START + dt.timedelta(days=1)
    # A literal ('failed') travels as an anonymous parameter; the datetime needs the dialect's conversion.
    statement = DirectStatement(
        update(event_targets)
        .where(event_targets.c.account_id == bindparam("account"))
        .values(status="failed", due_at=bindparam("due", type_=event_targets.c.due_at.type))
    )
    with db.direct_write() as tx:
        assert tx.execute(statement, {"account": key.account_id, "due": later}).rowcount == 1
    with db.read() as conn:
        row = targets.get_target(conn, key)
    assert row is not None and (row.status, row.due_at) == ("failed", later)


def test_a_missing_parameter_is_named(db: Database) -> None:
    statement = DirectStatement(select(events_table.c.id).where(events_table.c.tenant_id == bindparam("tenant")))
    with db.direct_read() as tx, pytest.raises(ValueError, match="tenant"):
        tx.execute(statement, {})


def test_a_failed_write_transaction_leaves_nothing_behind(db: Database) -> None:
    key = _planned(db)
    with pytest.raises(RuntimeError), db.direct_write() as tx:
        assert targets.record_synced(tx, key, version=1, external_id="x", etag="e", final_status="synced")
        idempotency.record_success(tx, "k", job_id="j", result={}, ttl_seconds=60)
        raise RuntimeError("crash before commit")
    with db.read() as conn:
        row = targets.get_target(conn, key)
        assert row is not None and row.synced_version == 0 and not idempotency.succeeded(conn, "k")
    # The connection went back to the pool in a clean state: the next transaction works.
    with db.direct_write() as tx:
        assert targets.record_synced(tx, key, version=1, external_id="x", etag="e", final_status="synced")


def test_an_unreachable_database_is_a_temporary_store_error(db: Database, tmp_path: Path) -> None:
    # A directory is no SQLite database; nothing listens on port 1.
    url = f"sqlite:///{tmp_path}" if db.dialect == "sqlite" else "postgresql+psycopg://postgres@127.0.0.1:1/test"
    broken = Database(url, pool_size=1)
    with pytest.raises(StoreUnavailable), broken.direct_read() as tx:
        tx.execute(DirectStatement(select(events_table.c.id)), {})
    broken.dispose()


@pytest.mark.postgresql_only  # a SQLite connection cannot be cut from outside
def test_a_connection_lost_mid_job_is_discarded_not_reused(db: Database) -> None:
    lone = Database(str(db.engine.url.render_as_string(hide_password=False)), pool_size=1, pre_ping=False)
    backend = DirectStatement(select(func.pg_backend_pid().label("pid")))
    with lone.direct_read() as tx:
        row = tx.first(backend, {})
    assert row is not None
    with db.engine.connect() as admin:
        admin.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": row["pid"]})
    with pytest.raises(StoreUnavailable, match="lost"), lone.direct_read() as tx:
        tx.execute(backend, {})
    with lone.direct_read() as tx:  # the broken connection was dropped and a fresh one opened
        again = tx.first(backend, {})
    assert again is not None and again["pid"] != row["pid"]
    lone.dispose()


def test_each_thread_keeps_its_own_connection_until_it_is_closed(db: Database) -> None:
    connections = DirectConnections(db.engine, recycle_seconds=3600)
    first = connections.checkout()
    connections.checkin()
    assert connections.checkout() is first  # reused, not checked out of the pool again
    connections.checkin()
    elsewhere: list[object] = []
    thread = threading.Thread(target=lambda: elsewhere.append(connections.checkout()))
    thread.start()
    thread.join()
    assert elsewhere and elsewhere[0] is not first
    connections.close_all()
    fresh = connections.checkout()
    connections.checkin()
    assert fresh is not first
    with pytest.raises(db.engine.dialect.loaded_dbapi.Error):
        first.cursor().execute("SELECT 1")  # closed, not leaked
    connections.close_all()


def test_a_shared_connection_serves_one_thread_at_a_time(db: Database) -> None:
    connections = DirectConnections(db.engine, recycle_seconds=3600, shared=True)  # SQLite's hot path
    first = connections.checkout()
    got: list[object] = []
    taken = threading.Event()

    def other_thread() -> None:
        got.append(connections.checkout())
        taken.set()
        connections.checkin()

    thread = threading.Thread(target=other_thread)
    thread.start()
    assert not taken.wait(0.2)  # it waits for its turn...
    connections.checkin()
    assert taken.wait(10)  # ...and then gets the same connection, its page cache still warm
    thread.join()
    assert got == [first]
    connections.close_all()


def test_an_old_connection_is_replaced(db: Database) -> None:
    connections = DirectConnections(db.engine, recycle_seconds=0)
    first = connections.checkout()
    connections.checkin()
    assert connections.checkout() is not first
    connections.close_all()


def test_direct_transactions_do_not_nest(db: Database) -> None:
    key = _planned(db)
    with db.direct_write() as tx:
        with pytest.raises(RuntimeError, match="do not nest"), db.direct_read():
            pass
        assert targets.record_synced(tx, key, version=1, external_id="x", etag="e", final_status="synced")
    with db.read() as conn:
        row = targets.get_target(conn, key)
    assert row is not None and row.synced_version == 1  # the outer transaction was not disturbed


def test_the_job_snapshot_reads_state_and_idempotency_in_one_statement(db: Database) -> None:
    key = _planned(db)
    payload = new_payload(tenant_id="t", entity_id="e1", account_id=key.account_id, operation="create", version=1,
                          trace_id="tr")  # fmt: skip
    cipher = CredentialCipher(None)
    first = load_snapshot(db, cipher, payload)
    assert first.account is not None and first.event is not None and first.target is not None
    assert first.event.attendees == ("a@example.com", "b@example.com") and not first.already_done
    with db.direct_write() as tx:
        idempotency.record_success(tx, payload.idempotency_key, job_id="j", result={}, ttl_seconds=60)
    assert load_snapshot(db, cipher, payload).already_done
    # An unknown account: the parts are read one by one, so the job can say what is missing.
    missing = load_snapshot(db, cipher, payload.model_copy(update={"account_id": "acc_missing"}))
    assert missing.account is None and missing.event is not None and missing.target is None


def test_a_write_tells_whether_its_compare_and_set_won_after_the_commit(db: Database) -> None:
    key = _planned(db)
    with db.direct_write() as tx:  # on PostgreSQL the statements are only queued here (one pipeline)
        won = targets.record_synced(tx, key, version=2, external_id="x", etag="e", final_status="synced")
        idempotency.record_success(tx, "k2", job_id="j", result={}, ttl_seconds=60)
        lost = targets.record_synced(tx, key, version=1, external_id="y", etag="f", final_status="synced")
    assert won and not lost
    with db.read() as conn:
        row = targets.get_target(conn, key)
        assert row is not None and (row.synced_version, row.external_id) == (2, "x")
        assert idempotency.succeeded(conn, "k2")


def test_a_statement_the_database_refuses_undoes_the_whole_write(db: Database) -> None:
    key = _planned(db)
    duplicate = DirectStatement(event_targets.insert().values(tenant_id=bindparam("t"), event_id=bindparam("e"),
                                                              account_id=bindparam("a"), wanted="present",
                                                              wanted_version=1, synced_version=0, status="pending",
                                                              updated_at=func.now()))  # fmt: skip
    with pytest.raises(Exception, match=r"(?i)unique|duplicate"), db.direct_write() as tx:
        targets.record_synced(tx, key, version=1, external_id="x", etag="e", final_status="synced")
        tx.execute(duplicate, {"t": key.tenant_id, "e": key.event_id, "a": key.account_id})  # the same key again
    with db.read() as conn:
        row = targets.get_target(conn, key)
        assert row is not None and row.synced_version == 0
    with db.direct_write() as tx:  # the kept connection is usable again
        assert targets.record_synced(tx, key, version=1, external_id="x", etag="e", final_status="synced")

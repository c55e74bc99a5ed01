"""A sync job's two transactions through the repositories, on both backends: values round-trip exactly,
a compare-and-set tells whether it won, a failed write leaves nothing, a lost connection is replaced."""

from __future__ import annotations

import datetime as dt
import sqlite3
from pathlib import Path

import pytest
from sqlalchemy import Connection, bindparam, event, func, select, text

from calsync.core.model.change import EventFields
from calsync.core.model.errors import StoreUnavailable
from calsync.core.model.payload import JobPayload, new_payload
from calsync.core.store import accounts, database, events, idempotency, targets
from calsync.core.store.crypto import CredentialCipher
from calsync.core.store.database import Database
from calsync.core.store.schema import event_targets
from calsync.core.store.targets import TargetKey
from calsync.core.webhooks import store as webhooks
from calsync.core.worker.snapshot import load_snapshot
from tests.support import plan_target

pytestmark = pytest.mark.both_databases

_START = dt.datetime(2026, 3, 29, 0, 30, tzinfo=dt.UTC)
_OPTIONS = {"calendar": "primary", "n": 2, "nested": {"ok": True, "none": None}}


def _planned(db: Database) -> TargetKey:
    with db.write() as conn:
        account = accounts.add_account(conn, tenant_id="t", provider="memory", address="a@b.c", credentials=None,
                                       options=_OPTIONS)  # fmt: skip
        fields = EventFields(title="Zoë's review", start=_START, end=_START + dt.timedelta(hours=1),
                             attendees=("a@example.com", "b@example.com"), description=None)  # fmt: skip
        events.insert_event(conn, "t", "e1", fields, "all")
        key = TargetKey("t", "e1", account.id)
        plan_target(conn, key, wanted="present", version=1, due_at=_START)
    return key


def _payload(key: TargetKey) -> JobPayload:
    return new_payload(tenant_id=key.tenant_id, entity_id=key.event_id, account_id=key.account_id,
                       operation="create", version=1, trace_id="tr")  # fmt: skip


def test_the_job_snapshot_gives_back_exactly_what_was_stored(db: Database) -> None:
    key = _planned(db)
    snapshot = load_snapshot(db, CredentialCipher(None), _payload(key))
    account, event, target = snapshot.account, snapshot.event, snapshot.target
    assert account is not None and event is not None and target is not None
    # Converted values, not the driver's raw strings: JSON, aware datetimes, booleans, the vocabulary's strings.
    assert account.options == _OPTIONS and account.status == "active"
    assert event.title == "Zoë's review" and event.attendees == ("a@example.com", "b@example.com")
    assert event.start == _START and event.all_day is False and event.send_updates == "all"
    assert target.due_at == _START and target.due_at.tzinfo is not None
    assert (target.wanted, target.status, target.create_attempted) == ("present", "pending", False)


def test_datetimes_written_in_any_zone_come_back_as_the_same_instant_in_utc(db: Database) -> None:
    key = _planned(db)
    later = (_START + dt.timedelta(days=1)).astimezone(dt.timezone(dt.timedelta(hours=2)))
    with db.write() as conn:
        targets.record_retry(conn, key, version=1, due_at=later, error_class="ProviderUnavailable", message="503")
    with db.read() as conn:
        row = targets.get_target(conn, key)
    assert row is not None and row.due_at == later and row.due_at.utcoffset() == dt.timedelta(0)
    assert (row.status, row.waiting, row.error_class, row.last_error) == ("pending", "retry", "ProviderUnavailable",
                                                                          "503")  # fmt: skip


def test_a_notification_payload_round_trips_as_json(db: Database) -> None:
    payload = {"title": "Zoë", "n": 1.5, "list": [1, None, "x"], "nested": {"ok": False}}
    with db.write() as conn:
        webhooks.record_notification(conn, "msg_1", "t", "sync.succeeded", payload)
        webhooks.record_notification(conn, "msg_1", "t", "sync.succeeded", {"other": 1})  # recorded already: kept
    with db.read() as conn:
        stored = webhooks.get_notification(conn, "msg_1")
    assert stored is not None and stored.payload == payload and stored.event_type == "sync.succeeded"
    assert stored.created_at.tzinfo is not None and stored.dispatched_at is None


def test_the_job_snapshot_reads_state_and_idempotency_in_one_statement(db: Database) -> None:
    key = _planned(db)
    payload = _payload(key)
    cipher = CredentialCipher(None)
    first = load_snapshot(db, cipher, payload)
    assert first.account is not None and first.event is not None and first.target is not None
    assert not first.already_done
    with db.write() as conn:
        idempotency.record_success(conn, payload.idempotency_key, job_id="j", result={"a": [1]}, ttl_seconds=60)
    assert load_snapshot(db, cipher, payload).already_done
    # An unknown account: the parts are read one by one, so the job can say what is missing.
    missing = load_snapshot(db, cipher, payload.model_copy(update={"account_id": "acc_missing"}))
    assert missing.account is None and missing.event is not None and missing.target is None


def test_a_write_tells_whether_its_compare_and_set_won(db: Database) -> None:
    key = _planned(db)
    with db.write() as conn:
        won = targets.record_synced(conn, key, version=2, external_id="x", etag="e", final_status="synced")
        idempotency.record_success(conn, "k2", job_id="j", result={}, ttl_seconds=60)
        lost = targets.record_synced(conn, key, version=1, external_id="y", etag="f", final_status="synced")
    assert won and not lost
    with db.read() as conn:
        row = targets.get_target(conn, key)
        assert row is not None and (row.synced_version, row.external_id, row.status) == (2, "x", "synced")
        assert idempotency.succeeded(conn, "k2")


def test_a_failed_write_transaction_leaves_nothing_behind(db: Database) -> None:
    key = _planned(db)
    with pytest.raises(RuntimeError), db.write() as conn:
        assert targets.record_synced(conn, key, version=1, external_id="x", etag="e", final_status="synced")
        idempotency.record_success(conn, "k", job_id="j", result={}, ttl_seconds=60)
        raise RuntimeError("crash before commit")
    with db.read() as conn:
        row = targets.get_target(conn, key)
        assert row is not None and row.synced_version == 0 and not idempotency.succeeded(conn, "k")
    # The connection went back to the pool in a clean state: the next transaction works.
    with db.write() as conn:
        assert targets.record_synced(conn, key, version=1, external_id="x", etag="e", final_status="synced")


def test_a_read_transaction_is_one_transaction_too(db: Database) -> None:
    # read() may write what cannot conflict: its statements commit together or not at all, on SQLite as well
    # (whose driver runs without implicit transactions: database.begin() opens this one).
    key = _planned(db)
    with pytest.raises(RuntimeError), db.read() as conn:
        assert targets.record_synced(conn, key, version=1, external_id="x", etag="e", final_status="synced")
        raise RuntimeError("crash before commit")
    with db.read() as conn:
        row = targets.get_target(conn, key)
        assert row is not None and row.synced_version == 0


def test_a_statement_the_database_refuses_undoes_the_whole_write(db: Database) -> None:
    key = _planned(db)
    duplicate = event_targets.insert().values(tenant_id=bindparam("t"), event_id=bindparam("e"),
                                              account_id=bindparam("a"), wanted="present", wanted_version=1,
                                              synced_version=0, status="pending", updated_at=func.now())  # fmt: skip
    with pytest.raises(Exception, match=r"(?i)unique|duplicate"), db.write() as conn:
        targets.record_synced(conn, key, version=1, external_id="x", etag="e", final_status="synced")
        conn.execute(duplicate, {"t": key.tenant_id, "e": key.event_id, "a": key.account_id})  # the same key again
    with db.read() as conn:
        row = targets.get_target(conn, key)
        assert row is not None and row.synced_version == 0
    with db.write() as conn:  # the connection is usable again
        assert targets.record_synced(conn, key, version=1, external_id="x", etag="e", final_status="synced")


def test_an_unreachable_database_is_a_temporary_store_error(db: Database, tmp_path: Path) -> None:
    # A directory is no SQLite database; nothing listens on port 1.
    url = f"sqlite:///{tmp_path}" if db.dialect == "sqlite" else "postgresql+psycopg://postgres@127.0.0.1:1/test"
    broken = Database(url, pool_size=1)
    with pytest.raises(StoreUnavailable), broken.read() as conn:
        conn.execute(select(event_targets.c.event_id))
    broken.dispose()


def test_a_write_that_cannot_take_sqlites_write_lock_is_a_temporary_store_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # begin() sends BEGIN IMMEDIATE on the driver's cursor, past SQLAlchemy's error wrapping: still StoreUnavailable.
    monkeypatch.setattr(database, "_SQLITE_BUSY_TIMEOUT_S", 0)  # no wait for the lock
    path = tmp_path / "locked.sqlite3"
    lone = Database(f"sqlite:///{path}", pool_size=1)
    with lone.write():  # its connection open (the database in WAL mode) before another writer holds the lock
        pass
    holder = sqlite3.connect(path, isolation_level=None)  # another process' writer, say
    holder.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(StoreUnavailable, match="locked"), lone.write():
            pass
    finally:
        holder.close()
        lone.dispose()


@pytest.mark.postgresql_only  # a SQLite connection cannot be cut from outside
def test_a_connection_lost_mid_job_is_discarded_not_reused(db: Database) -> None:
    lone = Database(str(db.engine.url.render_as_string(hide_password=False)), pool_size=1, pre_ping=False)
    backend = select(func.pg_backend_pid())
    with lone.read() as conn:
        pid = conn.execute(backend).scalar_one()
    with db.engine.connect() as admin:
        admin.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
    with pytest.raises(StoreUnavailable, match="lost"), lone.read() as conn:
        conn.execute(backend)
    with lone.read() as conn:  # the broken connection was dropped and a fresh one opened
        assert conn.execute(backend).scalar_one() != pid
    lone.dispose()


def test_the_job_snapshot_is_read_outside_a_transaction_on_postgresql(db: Database) -> None:
    # One statement is one snapshot: on PostgreSQL without BEGIN and COMMIT (one round trip, not three);
    # on SQLite without BEGIN either (no isolation level set: the driver's own transactions are off).
    key = _planned(db)
    levels: list[str | None] = []

    def _seen(conn: Connection, *_: object) -> None:
        levels.append(conn.get_execution_options().get("isolation_level"))

    event.listen(db.engine, "before_cursor_execute", _seen)
    try:
        load_snapshot(db, CredentialCipher(None), _payload(key))
    finally:
        event.remove(db.engine, "before_cursor_execute", _seen)
    assert levels and set(levels) == ({None} if db.dialect == "sqlite" else {"AUTOCOMMIT"})

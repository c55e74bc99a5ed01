"""Connections and transactions for SQLite and PostgreSQL, with the quirks of each handled once.

``read()`` opens a plain transaction, ``autocommit()`` none (one statement is its own); ``write()`` one
that takes the write lock up front on SQLite (``BEGIN IMMEDIATE``), because a deferred transaction that
upgrades to a writer fails at once with "database is locked" when another writer got in first, ignoring
the busy timeout.

SQLite's driver runs with its own implicit transactions off (``isolation_level = None``), so a transaction
exists only where :func:`begin` sends ``BEGIN``: ``read()``, ``write()`` and the migrations do. A statement
run on a connection that did not (``engine.connect()`` alone) is its own transaction, as in ``autocommit()``.
``BEGIN`` is sent by the code that opens the transaction rather than by a "begin" event listener, because
any ``ConnectionEvents`` listener makes every statement of every connection dispatch its events.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import ColumnElement, Connection, Engine, Table, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, OperationalError

from calsync.core.model.errors import StoreUnavailable

if TYPE_CHECKING:
    from sqlalchemy.dialects import postgresql, sqlite

_SQLITE_BUSY_TIMEOUT_S = 30
_RECYCLE_S = 1800  # servers and proxies drop idle connections; replace ours before they do


def _prepare_sqlite(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: sqlite3.Connection, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # no implicit BEGIN: begin() below sends it where one is wanted
        for pragma in ("journal_mode=WAL", "foreign_keys=ON", "synchronous=NORMAL", "mmap_size=268435456",
                       f"busy_timeout={_SQLITE_BUSY_TIMEOUT_S * 1000}"):  # fmt: skip
            dbapi_connection.execute(f"PRAGMA {pragma}")


@contextlib.contextmanager
def begin(conn: Connection, sqlite_mode: str = "DEFERRED") -> Iterator[Connection]:
    """A transaction on ``conn`` (``Connection.begin()``), committed on exit and rolled back on any exception; on
    SQLite one the driver really opens, ``BEGIN`` of ``sqlite_mode`` sent first (see the module's docstring), on the
    driver's cursor: a statement that returns nothing needs no execution context of SQLAlchemy's."""
    with conn.begin():
        if conn.dialect.name == "sqlite":
            conn.connection.cursor().execute(f"BEGIN {sqlite_mode}")
        yield conn


class Database:
    """The engine of one process, sized to its worker threads."""

    def __init__(self, url: str, *, pool_size: int = 10, pre_ping: bool = True) -> None:
        parsed = make_url(url)
        self.dialect = parsed.get_backend_name()
        # Workers skip the pre-ping round trip on every checkout: a connection that died with a database
        # restart fails its job with StoreUnavailable, which is retried, and the pool is then refreshed.
        kwargs: dict[str, Any] = {"pool_pre_ping": pre_ping, "pool_recycle": _RECYCLE_S, "pool_size": pool_size}
        if self.dialect == "sqlite":
            if parsed.database and parsed.database != ":memory:":
                Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
            kwargs["connect_args"] = {"timeout": _SQLITE_BUSY_TIMEOUT_S, "check_same_thread": False}
        else:
            kwargs["max_overflow"] = max(2, pool_size // 2)
        self.engine = create_engine(parsed, **kwargs)
        # SQLite has one writer at a time; queueing this process's writers on a lock hands the database over
        # at once, where SQLite's busy handler would make each waiter sleep and poll (1 ms, 2 ms, 5 ms, ...).
        self._writer: contextlib.AbstractContextManager[object] = contextlib.nullcontext()
        if self.dialect == "sqlite":
            _prepare_sqlite(self.engine)
            self._writer = threading.Lock()

    @contextlib.contextmanager
    def read(self) -> Iterator[Connection]:
        """A transaction for reads (and writes that cannot conflict)."""
        with _translate_errors(), self.engine.connect() as conn, begin(conn):
            yield conn

    @contextlib.contextmanager
    def autocommit(self) -> Iterator[Connection]:
        """Each statement its own transaction, no BEGIN and COMMIT around it: a read that is one statement
        (one consistent snapshot) costs one round trip on PostgreSQL instead of three. On SQLite no BEGIN is sent
        (the driver's own implicit transactions stay off, as for every connection)."""
        with _translate_errors(), self.engine.connect() as conn:
            yield conn if self.dialect == "sqlite" else conn.execution_options(isolation_level="AUTOCOMMIT")

    @contextlib.contextmanager
    def write(self) -> Iterator[Connection]:
        """A transaction that will write: committed on exit, rolled back on any exception."""
        with _translate_errors(), self._writer, self.engine.connect() as conn, begin(conn, "IMMEDIATE"):
            yield conn

    def dispose(self) -> None:
        """Close the pooled connections (end of process or test)."""
        self.engine.dispose()


def given_equal(*filters: tuple[ColumnElement[Any], object]) -> list[ColumnElement[bool]]:
    """``column = value`` for each optional filter ``(column, value)`` whose value is given (not None)."""
    return [column == value for column, value in filters if value is not None]


def upsert_insert(table: Table, dialect: str) -> postgresql.Insert | sqlite.Insert:
    """The ``INSERT`` of ``dialect`` that has ``ON CONFLICT`` clauses (both dialects share the API)."""
    if dialect == "postgresql":  # imported here: a process on SQLite never loads the PostgreSQL dialect
        from sqlalchemy.dialects.postgresql import insert as postgresql_insert

        return postgresql_insert(table)
    from sqlalchemy.dialects.sqlite import insert as sqlite_insert

    return sqlite_insert(table)


def take_over_expired(table: Table, dialect: str, **replaced: Any) -> postgresql.Insert | sqlite.Insert:
    """An ``INSERT`` into ``table`` (with ``expires_at`` and ``created_at`` columns) that takes over a row of the same
    primary key whose time ran out by the new row's creation, every other column from the new row unless ``replaced``
    says otherwise, and leaves a live row alone: one statement for "the first, or the first since it expired"."""
    insert = upsert_insert(table, dialect)
    key = list(table.primary_key)
    new = {column.name: insert.excluded[column.name] for column in table.columns if column not in key}
    expired = table.c.expires_at <= insert.excluded.created_at
    return insert.on_conflict_do_update(index_elements=key, set_={**new, **replaced}, where=expired)


@contextlib.contextmanager
def _translate_errors() -> Iterator[None]:
    # SQLAlchemy's errors as the store's: StoreUnavailable for a lost or unreachable database.
    try:
        yield
    except sqlite3.OperationalError as exc:  # begin()'s BEGIN, sent past SQLAlchemy: the lock's wait ran out
        raise StoreUnavailable(f"database unavailable: {type(exc).__name__}: {exc}") from exc
    except DBAPIError as exc:
        if exc.connection_invalidated:
            raise StoreUnavailable(f"database connection lost: {exc.orig}") from exc
        if isinstance(exc, OperationalError):
            raise StoreUnavailable(f"database unavailable: {type(exc.orig).__name__}: {exc.orig}") from exc
        raise

"""Direct driver access for the per-job hot path: Core statements compiled once, run on the DBAPI cursor.

A sync job runs two short transactions (read its state, record its result). Through SQLAlchemy's
``Connection`` each statement costs far more CPU than SQLite needs to run it (execution context,
result proxy, events, pool bookkeeping per transaction; benchmarks/pipeline.py), and worker threads
share one GIL. So the hot statements stay SQLAlchemy Core objects, defined once in their repository,
but are compiled once per dialect and executed here on the driver connection, with the dialect's
own bind and result processors applied, so values round-trip exactly as through SQLAlchemy
(tests/store/test_direct.py compares both paths on SQLite and PostgreSQL).

These transactions run on kept driver connections (:class:`DirectConnections`: one per thread on
PostgreSQL, one per process on SQLite), taken from the engine's pool once and detached from it:
checking a connection out of the pool and back in for every transaction cost as much CPU as the
statements themselves.

Everything else (CLI, producer, reconciler, migrations) keeps using ``Database.read()/write()``.
"""

from __future__ import annotations

import contextlib
import operator
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Dialect, Engine
from sqlalchemy.sql import ClauseElement
from sqlalchemy.sql.compiler import SQLCompiler

Processor = Callable[[Any], Any]


@dataclass(frozen=True)
class _Compiled:
    sql: str
    names: Callable[[Mapping[str, Any]], Any] | None  # picks values in placeholder order, for ?-style drivers
    binds: tuple[tuple[str, Processor], ...]  # parameters whose values the dialect converts
    defaults: dict[str, Any]  # literals the statement carries as anonymous parameters
    required: frozenset[str]
    keys: tuple[str, ...]  # result columns
    columns: tuple[tuple[int, Processor], ...]  # result columns whose values the dialect converts


class DirectStatement:
    """A Core statement that the hot path runs on the driver; compiled on first use for each dialect."""

    def __init__(self, statement: ClauseElement) -> None:
        self.statement = statement
        self._compiled: dict[str, _Compiled] = {}
        self._lock = threading.Lock()

    def compiled(self, dialect: Dialect) -> _Compiled:
        """This statement for ``dialect`` (compiled once per process)."""
        found = self._compiled.get(dialect.name)
        if found is None:
            with self._lock:
                found = self._compiled.get(dialect.name) or self._compile(dialect)
                self._compiled[dialect.name] = found
        return found

    def _compile(self, dialect: Dialect) -> _Compiled:
        compiled = self.statement.compile(dialect=dialect)
        assert isinstance(compiled, SQLCompiler)
        # bind_names holds the names as rendered (anonymous parameters such as literals get theirs here).
        binds = {
            name: bind.type.dialect_impl(dialect).bind_processor(dialect) for bind, name in compiled.bind_names.items()
        }
        selected = getattr(self.statement, "selected_columns", None)
        keys: tuple[str, ...] = ()
        columns: list[tuple[int, Processor]] = []
        if selected is not None:
            keys = tuple(selected.keys())
            for index, column in enumerate(selected):
                processor = column.type.dialect_impl(dialect).result_processor(dialect, None)
                if processor is not None:
                    columns.append((index, processor))
        required = frozenset(name for bind, name in compiled.bind_names.items() if bind.required)
        order = tuple(compiled.positiontup or ()) if compiled.positional else None
        return _Compiled(
            sql=compiled.string,
            names=_picker(order),
            binds=tuple((name, processor) for name, processor in binds.items() if processor is not None),
            defaults={name: value for name, value in compiled.params.items() if name not in required},
            required=required,
            keys=keys,
            columns=tuple(columns),
        )


def _picker(order: tuple[str, ...] | None) -> Callable[[Mapping[str, Any]], Any] | None:
    if order is None:
        return None
    if len(order) == 1:  # itemgetter of one name returns the bare value, not a tuple
        return lambda values: (values[order[0]],)
    return operator.itemgetter(*order) if order else lambda values: ()


class DirectResult:
    """Rows (as dicts keyed by the statement's column names) and the driver's rowcount.

    In a pipelined write (PostgreSQL) the rowcount arrives with the commit; asked for earlier, it
    costs a round trip of its own (the pipeline is synced to get it).
    """

    def __init__(self, rows: list[dict[str, Any]], rowcount: Callable[[], int]) -> None:
        self.rows = rows
        self._rowcount = rowcount

    @property
    def rowcount(self) -> int:
        """Rows the statement matched (updated, deleted, inserted or returned)."""
        return self._rowcount()


class DirectTransaction:
    """Statements on one driver connection inside one transaction (begun and ended by :func:`direct_transaction`)."""

    def __init__(self, cursor: Any, dialect: Dialect, *, pipeline: Any = None) -> None:
        self._cursor = cursor
        self.dialect = dialect
        self._pipeline = pipeline  # psycopg's Pipeline while the statements are only queued, else None

    def execute(self, statement: DirectStatement, params: Mapping[str, Any]) -> DirectResult:
        """Run ``statement`` with ``params`` (every required bind parameter by name)."""
        if self._pipeline is not None:
            return self._queue(statement, params)
        compiled = self._run(statement, params)
        rows = [_converted(compiled, raw) for raw in self._cursor.fetchall()] if compiled.keys else []
        rowcount = self._cursor.rowcount
        return DirectResult(rows, lambda: rowcount)

    def _queue(self, statement: DirectStatement, params: Mapping[str, Any]) -> DirectResult:
        cursor = self._cursor.connection.cursor()  # a pipelined cursor keeps the result of its last statement
        compiled = self._run(statement, params, cursor)
        rows: list[dict[str, Any]] = []
        if compiled.keys:
            self._pipeline.sync()
            rows = [_converted(compiled, raw) for raw in cursor.fetchall()]

        def rowcount() -> int:
            if cursor.rowcount < 0 and self._pipeline is not None:
                self._pipeline.sync()
            return int(cursor.rowcount)

        return DirectResult(rows, rowcount)

    def _synced(self) -> None:
        self._pipeline = None

    def first(self, statement: DirectStatement, params: Mapping[str, Any]) -> dict[str, Any] | None:
        """The first row of a query, without fetching on to the end (one driver call fewer)."""
        compiled = self._run(statement, params)
        raw = self._cursor.fetchone()
        return _converted(compiled, raw) if raw is not None else None

    def _run(self, statement: DirectStatement, params: Mapping[str, Any], cursor: Any = None) -> _Compiled:
        compiled = statement.compiled(self.dialect)
        missing = compiled.required - params.keys()
        if missing:
            raise ValueError(f"missing parameters for {compiled.sql[:60]!r}...: {sorted(missing)}")
        values = {**compiled.defaults, **params}
        for name, processor in compiled.binds:
            values[name] = processor(values[name])
        (cursor or self._cursor).execute(compiled.sql, values if compiled.names is None else compiled.names(values))
        return compiled


@contextlib.contextmanager
def direct_transaction(raw: Any, cursor: Any, dialect: Dialect, *, begin: str | None) -> Iterator[DirectTransaction]:
    """A hot-path transaction on a kept driver connection (``begin`` None: reads only); the caller commits.

    SQLite (an autocommit driver here) gets ``begin`` itself. PostgreSQL connections are kept in
    autocommit mode: a read is its one statement, one round trip (psycopg's implicit BEGIN and the
    COMMIT made three); a write queues BEGIN, its statements and COMMIT in one psycopg pipeline, one
    round trip (it was four). benchmarks/worker.py --database postgresql counts them: 7.05 per job before.
    """
    if begin is None or dialect.name != "postgresql":
        if begin is not None:
            cursor.execute(begin)
        yield DirectTransaction(cursor, dialect)
        return
    with raw.pipeline() as pipeline:
        cursor.execute("BEGIN")
        tx = DirectTransaction(cursor, dialect, pipeline=pipeline)
        yield tx
        cursor.execute("COMMIT")
    tx._synced()


def _converted(compiled: _Compiled, raw: Sequence[Any]) -> dict[str, Any]:
    row = list(raw)
    for index, processor in compiled.columns:
        row[index] = processor(row[index])
    return dict(zip(compiled.keys, row, strict=True))


@dataclass
class _Held:
    connection: Any  # the DBAPI connection
    opened: float  # time.monotonic() when it was opened
    generation: int  # DirectConnections.close_all() ends a generation


class DirectConnections:
    """The hot path's driver connections, reused until they fail or grow old.

    PostgreSQL: one per thread. SQLite: one per process, used by one thread at a time. SQLite runs
    one writer at a time anyway, and a connection's page cache is dropped whenever another
    connection writes; with one connection the cache stays warm, so a job's read costs no
    ``pread`` calls (there were 20 per job with a connection per thread).
    """

    def __init__(self, engine: Engine, *, recycle_seconds: float, shared: bool = False) -> None:
        self._engine = engine
        self._recycle = recycle_seconds
        self._local = threading.local()  # .held (a connection per thread), .busy (a transaction is open)
        self._shared: _Held | None = None
        self._turn = threading.Lock() if shared else None  # whose turn it is on the shared connection
        self._open: set[Any] = set()  # every kept connection, so close_all() reaches them all
        self._lock = threading.Lock()
        self._generation = 0

    def checkout(self) -> Any:
        """A connection for one transaction on this thread (opened through the pool, so set up like any)."""
        if getattr(self._local, "busy", False):
            raise RuntimeError("direct transactions do not nest: finish the open one first")
        if self._turn is not None:
            self._turn.acquire()
        try:
            held = self._held()
            if held is None or held.generation != self._generation or time.monotonic() - held.opened > self._recycle:
                self.discard()
                fairy = self._engine.raw_connection()  # may raise the driver's own error
                fairy.detach()
                connection: Any = fairy.dbapi_connection
                if self._engine.dialect.name == "postgresql":
                    connection.autocommit = True  # transactions are begun explicitly (direct_transaction)
                held = _Held(connection, time.monotonic(), self._generation)
                with self._lock:
                    self._open.add(held.connection)
                self._keep(held)
        except BaseException:
            if self._turn is not None:
                self._turn.release()
            raise
        self._local.busy = True
        return held.connection

    def checkin(self) -> None:
        """The transaction on this thread's connection is over."""
        self._local.busy = False
        if self._turn is not None:
            self._turn.release()

    def discard(self) -> None:
        """Close the connection this thread uses (broken, or too old); the next checkout opens another."""
        held = self._held()
        self._keep(None)
        if held is not None:
            with self._lock:
                self._open.discard(held.connection)
            _close_quietly(held.connection)

    def close_all(self) -> None:
        """Close every connection; the next checkouts open new ones."""
        with self._lock:
            connections, self._open = list(self._open), set()
            self._generation += 1
        for connection in connections:
            _close_quietly(connection)

    def _held(self) -> _Held | None:
        return self._shared if self._turn is not None else getattr(self._local, "held", None)

    def _keep(self, held: _Held | None) -> None:
        if self._turn is not None:
            self._shared = held
        else:
            self._local.held = held


def _close_quietly(connection: Any) -> None:
    with contextlib.suppress(Exception):  # a connection that cannot even close is gone anyway
        connection.close()

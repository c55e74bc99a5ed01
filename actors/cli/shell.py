"""What every command shares with the shell it runs in: settings from its environment and the clients they open,
its input (JSON files, ``KEY=VALUE`` options), its output (JSON or a table, progress on stderr), and its exit code
with a one-line reason."""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import getpass
import json
import socket
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, get_args

import click
import dramatiq.errors
import redis
import sqlalchemy.exc
from rich.console import Console, JustifyMethod
from rich.table import Table

from calsync.core.clients import Clients, connect
from calsync.core.config.settings import Settings, child_environment, load_settings
from calsync.core.model.errors import CalsyncError, InvalidChange, PermanentError
from calsync.core.model.ids import check_identifier

# Tables stay readable when piped (rich would otherwise assume 80 columns).
stdout = Console(soft_wrap=True, width=None if sys.stdout.isatty() else 160)
stderr = Console(stderr=True, soft_wrap=True)


#: The commands that need the queue running: only these start the embedded Redis when they open the clients (docs:
#: README "Command line"). ``pause`` and ``resume`` open Redis alone, and start it themselves (actors/cli/pause.py).
STARTS_EMBEDDED_REDIS = frozenset(
    {"worker", "serve", "submit", "reconcile", "dlq replay", "retry-now", "demo", "accounts remove"}
)


class CliState:
    """Settings and clients of one CLI invocation, each built on first use; the clients closed when it ends."""

    @functools.cached_property
    def settings(self) -> Settings:
        """Settings from the environment (errors name the bad variable)."""
        return load_settings()

    @functools.cached_property
    def clients(self) -> Clients:
        """The clients for this command; only a command that needs the queue starts the embedded Redis."""
        ctx = click.get_current_context(silent=True)
        command = " ".join(ctx.command_path.split()[1:]) if ctx is not None else None
        return connect(self.settings, start_embedded=command is None or command in STARTS_EMBEDDED_REDIS)

    def child_environment(self, **pinned: Any) -> dict[str, str]:
        """This process's environment for the processes a command starts: its settings, ``pinned`` and the broker
        and Redis URLs resolved here, so every child uses the same (embedded) Redis without resolving it again."""
        update = {"broker_url": self.clients.broker_url, "redis_url": self.clients.redis_url, **pinned}
        return child_environment(self.settings.model_copy(update=update))

    def close(self) -> None:
        """Release connections."""
        if "clients" in self.__dict__:
            self.clients.close()


pass_state = click.make_pass_decorator(CliState, ensure=True)


def user_at_host() -> str:
    """Who runs this command, as ``user@host``: what a pause and the audit log of an operator command record."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def print_json(value: Any) -> None:
    """Machine-readable output: one JSON document on stdout."""
    click.echo(json.dumps(value, indent=2, default=str))


def table(
    title: str,
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
    missing: str = "",
    justify: JustifyMethod = "left",
) -> Table:
    """Human output: a table of ``rows`` (a time to the second, ``missing`` for None), the columns after the first
    aligned by ``justify``."""
    built = Table(title=title, title_justify="left")
    for index, column in enumerate(columns):
        built.add_column(column, justify=justify if index else "left")
    for row in rows:
        built.add_row(*(missing if value is None else _cell(value) for value in row))
    return built


def _cell(value: Any) -> str:
    return value.isoformat(timespec="seconds") if isinstance(value, dt.datetime) else str(value)


def print_list(
    as_json: bool, items: Sequence[Any], title: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]
) -> None:
    """A list command's output: each item's ``as_json()`` in one JSON document, or the table of ``rows``."""
    if as_json:
        print_json([item.as_json() for item in items])
    else:
        stdout.print(table(title, columns, rows))


def read_json_file(path: Path, what: str) -> Any:
    """Parse a JSON input file (``-``: standard input), naming the file and the position of a syntax error."""
    try:
        if str(path) == "-":
            text, path = sys.stdin.buffer.read().decode("utf-8"), Path("(stdin)")
        else:
            text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidChange(f"{what} {path} is not UTF-8: {exc.reason} at byte {exc.start}") from None
    except OSError as exc:
        raise InvalidChange(f"cannot read {what} {path}: {exc.strerror}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
        raise InvalidChange(f"{what} {path} is not valid JSON: {exc.msg} at {where}") from None
    except ValueError as exc:  # JSON the parser refuses: a number of more than 4300 digits
        raise InvalidChange(f"{what} {path} cannot be read as JSON: {str(exc).split(';', 1)[0]}") from None


def identifier(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A parameter's callback: its value (when given) if it is an identifier, else bad input naming the parameter as
    given (``--tenant``, ``TENANT``), in the words every door uses (:func:`check_identifier`)."""
    name = param.opts[0] if isinstance(param, click.Option) else param.human_readable_name
    return None if value is None else check_identifier(value, name)


class KeyValue(click.ParamType[tuple[str, Any], str]):
    """A ``KEY=VALUE`` option as a ``(key, value)`` pair; a value that parses as JSON (true, 3, "x") is taken as it."""

    name = "KEY=VALUE"

    def convert(self, value: str, param: click.Parameter | None, ctx: click.Context | None) -> tuple[str, Any]:
        key, sep, text = value.partition("=")
        if not sep or not key:
            self.fail(f"expected KEY=VALUE, got {value!r}", param, ctx)
        try:
            return key, json.loads(text)
        except json.JSONDecodeError:
            return key, text


def empty_directory(directory: Path, pattern: str) -> None:
    """Create ``directory`` or delete what a previous run left in it (only files calsync writes there)."""
    directory.mkdir(parents=True, exist_ok=True)
    for leftover in directory.glob(pattern):
        leftover.unlink(missing_ok=True)


@contextlib.contextmanager
def progress(label: str, total: int) -> Iterator[Callable[[int], None]]:
    """A progress bar on stderr for an interactive run over several items; yields what advances it by n."""
    if total < 2 or not sys.stderr.isatty():
        yield lambda n: None
        return
    from rich.progress import Progress  # only for a terminal: every command pays for what it imports

    with Progress(console=stderr, transient=True) as bar:
        task = bar.add_task(label, total=total)
        yield lambda n: bar.advance(task, n)


class CliError(click.ClickException):
    """A failure that a dependency caused, reported as one line on stderr.

    The exit codes (README "Exit codes", scripts branch on them): 0 done, 1 this, 2 :class:`BadInput`,
    3 :class:`Deferred`.
    """

    exit_code = 1
    label = "error"

    def show(self, file: Any = None) -> None:
        click.echo(f"calsync: {self.label}: {' '.join(self.format_message().split())}", err=True)


class BadInput(CliError):
    """Bad input or configuration (exit 2)."""

    exit_code = 2


class Deferred(CliError):
    """Accepted, but not enqueued for some of it (exit 3): ``calsync reconcile`` enqueues the rest."""

    exit_code = 3
    label = "deferred"


def exit_if_deferred(deferred: Sequence[str]) -> None:
    """Accepted but not enqueued for some accounts or events: say so on stderr and exit 3."""
    if deferred:
        raise Deferred(
            f"saved, but the enqueue failed for {', '.join(deferred)}; "
            "`calsync reconcile` re-enqueues them once the broker is back"
        )


def first_line(text: str) -> str:
    """The first non-blank line of a (library's) message, stripped."""
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


#: What a command may fail with that is said in one line (anything else is a bug: its traceback is shown).
Failure = CalsyncError | dramatiq.errors.DramatiqError | redis.RedisError | sqlalchemy.exc.SQLAlchemyError | OSError
FAILURES: tuple[type[Failure], ...] = get_args(Failure)


def failure(exc: Failure) -> CliError:
    """An error as one line in calsync's words (no SQL, no help URLs, no tracebacks) with its exit code."""
    if isinstance(exc, PermanentError):
        return BadInput(str(exc))
    if isinstance(exc, CalsyncError):
        return CliError(str(exc))
    if isinstance(exc, dramatiq.errors.DramatiqError):
        return CliError(f"broker unavailable: {type(exc).__name__}: {exc}")
    if isinstance(exc, sqlalchemy.exc.IntegrityError):
        return BadInput("the record conflicts with one already stored")
    if isinstance(exc, sqlalchemy.exc.DBAPIError):
        return CliError(f"database unavailable: {first_line(str(exc.orig)) or type(exc.orig).__name__}")
    if isinstance(exc, sqlalchemy.exc.SQLAlchemyError):
        return CliError(f"database error: {first_line(str(exc)).split(' (Background on')[0]}")
    if isinstance(exc, redis.RedisError):
        return CliError(f"Redis unavailable: {first_line(str(exc))}")
    where = f" ({exc.filename})" if exc.filename else ""  # an OSError: the last of the failures
    return CliError(f"{exc.strerror or type(exc).__name__}{where}")

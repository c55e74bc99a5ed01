"""What every CLI command shares: settings and runtime on demand, JSON/table output, input parsing."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import click
import redis
import sqlalchemy.exc
from rich.console import Console
from rich.table import Table

from calsync.core.config.settings import Settings, load_settings
from calsync.core.model.errors import InvalidChange
from calsync.core.runtime import Runtime

# Tables stay readable when piped (rich would otherwise assume 80 columns).
stdout = Console(soft_wrap=True, width=None if sys.stdout.isatty() else 160)
stderr = Console(stderr=True, soft_wrap=True)


#: The commands that need the queue running: only these start the embedded Redis (docs: README "Command line").
STARTS_EMBEDDED_REDIS = frozenset(
    {"worker", "serve", "submit", "reconcile", "dlq replay", "retry-now", "pause", "resume", "demo", "accounts remove"}
)


def _needs_queue() -> bool:
    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return True
    path = ctx.command_path.split()[1:]
    return " ".join(path) in STARTS_EMBEDDED_REDIS


class CliState:
    """Lazily built settings and runtime of one CLI invocation, closed when it ends."""

    def __init__(self) -> None:
        self._settings: Settings | None = None
        self._runtime: Runtime | None = None

    @property
    def settings(self) -> Settings:
        """Settings from the environment (errors name the bad variable)."""
        if self._settings is None:
            self._settings = load_settings()
        return self._settings

    @property
    def runtime(self) -> Runtime:
        """The runtime for this command."""
        if self._runtime is None:
            self._runtime = Runtime(self.settings, role="cli", start_embedded=_needs_queue())
        return self._runtime

    def close(self) -> None:
        """Release connections."""
        if self._runtime is not None:
            self._runtime.close()


pass_state = click.make_pass_decorator(CliState, ensure=True)


def print_json(value: Any) -> None:
    """Machine-readable output: one JSON document on stdout."""
    click.echo(json.dumps(value, indent=2, default=str))


def print_table(title: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """Human output: a table on stdout."""
    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*("" if v is None else str(v) for v in row))
    stdout.print(table)


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


def parse_options(pairs: Sequence[str]) -> dict[str, Any]:
    """``KEY=VALUE`` pairs; values that parse as JSON (true, 3, "x") are taken as such."""
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected KEY=VALUE, got {pair!r}", param_hint="--option")
        try:
            options[key] = json.loads(value)
        except json.JSONDecodeError:
            options[key] = value
    return options


def progress_enabled(count: int) -> bool:
    """Show progress bars only for interactive runs over several items."""
    return count > 1 and sys.stderr.isatty()


#: Exit codes, one table (README "Exit codes"): scripts branch on these.
EXIT_OK = 0
EXIT_UNAVAILABLE = 1
EXIT_BAD_INPUT = 2
EXIT_DEFERRED = 3

_NOUNS = {"provider_accounts": "account", "events": "event", "api_keys": "API key", "dead_letters": "dead letter"}


def first_line(text: str) -> str:
    """The first non-blank line of a (library's) message, stripped."""
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


def describe_failure(exc: BaseException) -> tuple[int, str]:
    """A library exception as (exit code, one line in calsync's words): no SQL, no help URLs, no tracebacks."""
    if isinstance(exc, sqlalchemy.exc.IntegrityError):
        table = re.search(r"INSERT INTO (\w+)", str(exc.statement or ""))
        noun = _NOUNS.get(table.group(1), "record") if table else "record"
        params = exc.params if isinstance(exc.params, dict) else {}
        if "id" in params:
            return EXIT_BAD_INPUT, f"{noun} {params['id']} already exists"
        return EXIT_BAD_INPUT, f"the {noun} conflicts with one already stored"
    if isinstance(exc, sqlalchemy.exc.DBAPIError):
        return EXIT_UNAVAILABLE, f"database unavailable: {first_line(str(exc.orig)) or type(exc.orig).__name__}"
    if isinstance(exc, sqlalchemy.exc.SQLAlchemyError):
        return EXIT_UNAVAILABLE, f"database error: {first_line(str(exc)).split(' (Background on')[0]}"
    if isinstance(exc, redis.RedisError):
        return EXIT_UNAVAILABLE, f"Redis unavailable: {first_line(str(exc))}"
    if isinstance(exc, OSError):
        where = f" ({exc.filename})" if exc.filename else ""
        return EXIT_UNAVAILABLE, f"{exc.strerror or type(exc).__name__}{where}"
    return EXIT_UNAVAILABLE, f"{type(exc).__name__}: {first_line(str(exc))}"


def exit_if_deferred(deferred_accounts: Sequence[str]) -> None:
    """Accepted but not enqueued for some accounts: say so on stderr and exit 3 (reconcile re-enqueues them)."""
    if deferred_accounts:
        click.echo(
            f"calsync: deferred: saved, but the enqueue failed for {', '.join(deferred_accounts)}; "
            "`calsync reconcile` re-enqueues them once the broker is back",
            err=True,
        )
        sys.exit(EXIT_DEFERRED)

"""The ``calsync`` command: a stable contract for scripts and operators (documented in README.md).

Every command reads ``CALSYNC_*`` settings, prints exactly one JSON document (or the table) on stdout,
logs on stderr, and exits with a code of the README's table and a one-line reason: 0 done, 1 a
dependency unavailable, 2 bad input or configuration, 3 accepted but deferred.
"""

from __future__ import annotations

import logging
import sys
from importlib import import_module
from importlib.metadata import entry_points
from typing import Any

import click

from calsync.actors.cli.shell import FAILURES, BadInput, CliState, failure
from calsync.core.config.logging import configure_logging
from calsync.core.config.settings import check_unknown_variables

COMMAND_GROUP = "calsync.commands"

# Each built-in command's module, imported when the command runs: importing them all (the HTTP server, every
# provider's client library) would make every invocation, `calsync --version` included, pay for all of them
# (docs/notes/performance.md). A command is its module's attribute of the command's name (`api-keys`: `api_keys`).
COMMANDS_OF_MODULE = {
    "accounts": ("accounts",),
    "api_keys": ("api-keys",),
    "changes": ("events", "submit"),
    "dlq": ("dlq",),
    "drift": ("drift",),
    "exporter": ("exporter",),
    "operators": ("operators",),
    "ops": ("migrate", "reconcile", "secret-key", "stop", "worker"),
    "pause": ("pause", "resume"),
    "retry_now": ("retry-now",),
    "serve": ("serve",),
    "status": ("status",),
    "webhooks": ("webhooks",),
}
BUILT_IN = {command: module for module, commands in COMMANDS_OF_MODULE.items() for command in commands}


class CalsyncGroup(click.Group):
    """Turns calsync's error values into one-line messages with meaningful exit codes.

    Built-in commands are imported when invoked (:data:`BUILT_IN`). Commands that other installed
    distributions register in the ``calsync.commands`` entry-point group (calsync-emulators' ``demo`` and
    ``emulator`` in a dev install) are loaded only when invoked, so a missing or broken plugin never stops
    the built-in commands.
    """

    def list_commands(self, ctx: click.Context) -> list[str]:
        plugins = (entry.name for entry in entry_points(group=COMMAND_GROUP))
        return sorted({*super().list_commands(ctx), *BUILT_IN, *plugins})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            return command
        if cmd_name in BUILT_IN:
            module = import_module(f"calsync.actors.cli.{BUILT_IN[cmd_name]}")
            loaded: click.Command = getattr(module, cmd_name.replace("-", "_"))
            self.add_command(loaded, cmd_name)
            return loaded
        for entry in entry_points(group=COMMAND_GROUP, name=cmd_name):
            try:
                loaded = entry.load()
            except ImportError as exc:
                raise BadInput(f"command {cmd_name!r} is registered by {entry.value} but cannot load: {exc}") from None
            if isinstance(loaded, click.Command):
                return loaded
        return None

    def invoke(self, ctx: click.Context) -> Any:
        state = ctx.ensure_object(CliState)
        ctx.call_on_close(state.close)
        try:
            return super().invoke(ctx)
        except click.exceptions.NoArgsIsHelpError:
            raise  # a group without its command: the help text, as click prints it
        except click.UsageError as exc:
            where = exc.ctx.command_path if exc.ctx is not None else "calsync"
            raise BadInput(f"{exc.format_message()} (see `{where} --help`)") from None
        except FAILURES as exc:
            raise failure(exc) from None


@click.group(cls=CalsyncGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="calsync")
def cli() -> None:
    """calsync: retry-safe calendar sync jobs (Dramatiq workers for Google Calendar and Exchange)."""
    configure_logging(logging.getLevelName(logging.WARNING), stream=sys.stderr)  # stdout is for the result
    check_unknown_variables()  # a misspelt CALSYNC_* variable stops every command, not only those reading settings


def main() -> None:
    """Console-script entry point."""
    cli(prog_name="calsync")


if __name__ == "__main__":
    main()

"""The commands this distribution adds to the ``calsync`` CLI (entry-point group ``calsync.commands``)."""

from __future__ import annotations

from collections.abc import Callable

import click

from calsync.actors.cli.common import CliState, pass_state, stdout
from calsync_emulators import ews, google
from calsync_emulators.demo import run_demo
from calsync_emulators.server import EmulatorApp, serve_forever

EMULATORS: dict[str, Callable[[], EmulatorApp]] = {"google": google.create_app, "ews": ews.create_app}


@click.command("demo")
@pass_state
def demo(state: CliState) -> None:
    """Run the scripted demo on embedded defaults (fresh data in DATA_DIR/demo)."""
    code = run_demo(state.settings, stdout)
    if code:
        raise SystemExit(code)


@click.command("emulator")
@click.argument("kind", type=click.Choice(sorted(EMULATORS)))
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to bind.")
@click.option("--port", type=click.IntRange(0, 65535), default=0, show_default=True, help="0 picks a free port.")
def emulator(kind: str, host: str, port: int) -> None:
    """Serve a local emulator of a provider API, with its /_emulator/ control API."""
    app = EMULATORS[kind]()
    serve_forever(app, host, port, lambda url: click.echo(f"{kind} emulator listening on {url}", err=True))

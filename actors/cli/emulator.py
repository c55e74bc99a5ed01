"""``calsync emulator google|ews``: run a provider emulator in the foreground."""

from __future__ import annotations

import importlib

import click

from calsync.providers.emulators.server import serve_forever

EMULATORS = {"google": "calsync.providers.emulators.google", "ews": "calsync.providers.emulators.ews"}


@click.command("emulator")
@click.argument("kind", type=click.Choice(sorted(EMULATORS)))
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to bind.")
@click.option("--port", type=click.IntRange(0, 65535), default=0, show_default=True, help="0 picks a free port.")
def emulator(kind: str, host: str, port: int) -> None:
    """Serve a local emulator of a provider API, with its /_emulator/ control API."""
    app = importlib.import_module(EMULATORS[kind]).create_app()
    serve_forever(app, host, port, lambda url: click.echo(f"{kind} emulator listening on {url}", err=True))

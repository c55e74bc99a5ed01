"""The commands this distribution adds to the ``calsync`` CLI (entry-point group ``calsync.commands``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import click

from calsync.actors.cli.shell import CliState, pass_state, stdout
from calsync_emulators import ews, google, graph
from calsync_emulators.demo import run_demo
from calsync_emulators.handout import Handout, ews_handout, google_handout, graph_handout
from calsync_emulators.server import EmulatorApp, serve_forever

EMULATORS: dict[str, Callable[[], EmulatorApp]] = {
    "google": google.create_app,
    "ews": ews.create_app,
    # One Exchange server: EWS at /EWS/Exchange.asmx and Graph at /v1.0/ over one mailbox store, plus Entra.
    "exchange": graph.create_app,
    "graph": graph.create_app,
}
_TLS = {"exchange", "graph"}


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
@click.option(
    "--credentials-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where to write the test users' credentials files (default: DATA_DIR/emulator-KIND).",
)
@pass_state
def emulator(state: CliState, kind: str, host: str, port: int, credentials_dir: Path | None) -> None:
    """Serve a local emulator of a provider API, with its /_emulator/ control API (exchange/graph: http + https).

    Prints where it listens, writes ready-to-use credentials files and prints them with the environment to
    export and the `calsync accounts add` commands that use them.
    """
    app = EMULATORS[kind]()
    directory = credentials_dir or state.settings.data_dir / f"emulator-{kind}"
    directory.mkdir(parents=True, exist_ok=True)
    tls = graph.self_signed(directory) if kind in _TLS else None

    def announce(url: str) -> None:
        click.echo(f"{kind} emulator listening on {url}", err=True)
        handout: Handout
        if tls is not None:
            https = url.replace("http://", "https://", 1)
            click.echo(f"  Graph {https}/v1.0/, authority {https}, CALSYNC_GRAPH_CA_FILE={tls.ca_file}", err=True)
            handout = graph_handout(url, directory, tls.ca_file)
        else:
            handout = google_handout(url, directory) if kind == "google" else ews_handout(url, directory)
        for line in handout.lines():
            click.echo(line, err=True)

    serve_forever(app, host, port, announce, tls.context if tls is not None else None)

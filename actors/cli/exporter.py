"""``calsync exporter``: the queue exporter in the foreground (one replica, its own Deployment)."""

from __future__ import annotations

import contextlib
import signal

import click

from calsync.actors.cli.shell import CliState, pass_state
from calsync.core.observability.exporter import serve


@click.command("exporter")
@click.option("--host", help="Interface to bind (default CALSYNC_EXPORTER_HOST).")
@click.option(
    "--port", type=click.IntRange(1, 65535), help="Port to serve /metrics on (default CALSYNC_EXPORTER_PORT)."
)
@pass_state
def exporter(state: CliState, host: str | None, port: int | None) -> None:
    """Serve queue, dead-letter, sync-target and worker gauges on /metrics until SIGTERM or Ctrl-C."""
    settings = state.settings
    host = host or settings.exporter_host
    port = port or settings.exporter_port
    server, thread = serve(state.clients, host=host, port=port)
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # SIGTERM stops it as Ctrl-C does
    click.echo(f"exporter listening on http://{host}:{port}/metrics", err=True)
    with contextlib.suppress(KeyboardInterrupt):
        thread.join()
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)

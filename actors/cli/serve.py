"""``calsync serve``: the HTTP intake on uvicorn (and ``--print-openapi``, the document in docs/openapi.json)."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from pathlib import Path

import click
import uvicorn
from fastapi import FastAPI
from uvicorn.supervisors import Multiprocess

from calsync.actors.cli.shell import CliState, empty_directory, pass_state
from calsync.core.api.app import create_app, openapi_document
from calsync.core.api.server import listening_socket
from calsync.core.api.services import services_from_clients
from calsync.core.clients import Clients, connect
from calsync.core.config.logging import configure_logging
from calsync.core.config.settings import load_settings
from calsync.core.console.app import create_console
from calsync.core.console.services import console_services_from_clients

APP_FACTORY = "calsync.actors.cli.serve:app_from_environment"


def app_from_environment() -> FastAPI:
    """One of several server processes' application, built from ``CALSYNC_*`` (uvicorn's factory for ``--workers``
    > 1): its metrics go to the directory all of them share, which /metrics sums."""
    settings = load_settings()
    configure_logging(settings.log_level)
    clients = connect(settings)
    return serving_app(clients, metrics_dir=settings.effective_metrics_dir / "api", on_shutdown=clients.close)


def serving_app(
    clients: Clients, *, metrics_dir: Path | None = None, on_shutdown: Callable[[], None] | None = None
) -> FastAPI:
    """The HTTP API over ``clients`` with the operator console mounted at ``/console``."""
    api = services_from_clients(clients, metrics_dir=metrics_dir)
    app = create_app(api, on_shutdown=on_shutdown)
    app.mount("/console", create_console(console_services_from_clients(clients, api)))
    return app


@click.command("serve")
@click.option("--host", help="Interface to bind (default CALSYNC_API_HOST).")
@click.option("--port", type=click.IntRange(1, 65535), help="Port (default CALSYNC_API_PORT).")
@click.option("--workers", type=click.IntRange(1), help="Server processes (default CALSYNC_API_WORKERS).")
@click.option("--print-openapi", is_flag=True, help="Print the OpenAPI 3.1 document and exit.")
@pass_state
def serve(state: CliState, host: str | None, port: int | None, workers: int | None, print_openapi: bool) -> None:
    """Serve the HTTP intake (POST /v1/changes, GET /v1/events/{id}, the DLQ) until SIGTERM or Ctrl-C."""
    if print_openapi:
        sys.stdout.write(openapi_document())
        return
    settings = state.settings
    host = host or settings.api_host
    port = port or settings.api_port
    workers = workers or settings.api_workers
    configure_logging(settings.log_level)
    clients = state.clients  # resolves the broker (starting the embedded Redis) and checks the schema once
    # uvicorn's own access log would repeat ours without the trace id; our JSON handler stays in place.
    config = functools.partial(uvicorn.Config, host=host, port=port, workers=workers, access_log=False,
                               log_config=None, proxy_headers=False, server_header=False)  # fmt: skip
    sockets = [listening_socket(host, port)]
    if workers == 1:
        click.echo(f"calsync serve listening on http://{host}:{port}", err=True)
        uvicorn.Server(config(serving_app(clients))).run(sockets=sockets)
        return
    directory = settings.effective_metrics_dir / "api"
    empty_directory(directory, "*.db")  # counters of a previous run would carry over
    # The server processes are spawned: they read the same settings, and prometheus_client its directory.
    os.environ.update(state.child_environment(api_workers=workers))
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(directory)
    state.close()
    click.echo(f"calsync serve listening on http://{host}:{port} ({workers} processes)", err=True)
    Multiprocess(config(APP_FACTORY, factory=True), sockets=sockets).run()

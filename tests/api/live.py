"""A live ``calsync serve`` application on uvicorn, in a thread, on a free port of 127.0.0.1."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import uvicorn
from fastapi import FastAPI

from calsync.core.api.app import create_app
from calsync.core.api.server import listening_socket
from calsync.core.api.services import ApiServices
from calsync.core.model.vocabulary import ApiScope
from calsync.core.store import api_keys
from calsync.core.store.database import Database
from tests.support import wait_until


@dataclass
class LiveApi:
    """Where the server listens and how to get keys for it."""

    url: str
    db: Database

    def key(self, tenant: str = "tenant-1", scope: ApiScope = "submit") -> str:
        """A new API key of ``tenant`` with ``scope``."""
        with self.db.write() as conn:
            secret, _record = api_keys.create(conn, tenant_id=tenant, scope=scope, name="test")
        return secret

    def client(self, key: str | None = None) -> httpx.Client:
        """An HTTP client for the server, sending ``key`` as the bearer token."""
        headers = {"Authorization": f"Bearer {key}"} if key is not None else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)


@contextlib.contextmanager
def serving(services: ApiServices, app: FastAPI | None = None) -> Iterator[LiveApi]:
    """Run the application over ``services`` (or ``app``, built over them) until the block ends."""
    sock = listening_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    # proxy_headers=False as `calsync serve` runs it: the peer and the scheme are the connection's, not a header's.
    config = uvicorn.Config(
        app or create_app(services), log_config=None, access_log=False, lifespan="on", proxy_headers=False
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True, name="live-api")
    thread.start()
    try:
        wait_until(lambda: server.started, timeout=20, what="the API server to start")
        yield LiveApi(f"http://127.0.0.1:{port}", services.db)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()

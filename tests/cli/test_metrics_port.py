"""A worker whose metrics port is taken stops at start with one line naming CALSYNC_METRICS_PORT (exit 2):
alerts depend on its metrics, so it never runs without them."""

from __future__ import annotations

import socket
from typing import Any

from calsync.core.config.settings import Settings
from calsync.core.store import migrate
from calsync.core.store.database import Database
from tests.cli.process import calsync, one_line_error


def test_a_worker_whose_metrics_port_is_taken_stops_with_one_line(settings_factory: Any) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        settings: Settings = settings_factory(metrics_host="127.0.0.1", metrics_port=port)
        migrate.migrate_to(Database(settings.effective_database_url))
        line = one_line_error(calsync("worker", "--processes", "1", "--threads", "1", settings=settings, timeout=60), 2)
    assert f"CALSYNC_METRICS_PORT {port}" in line and "in use" in line, line

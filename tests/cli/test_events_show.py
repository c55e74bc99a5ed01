"""``calsync events show`` says why a pending target waits: held by what, until when, and the provider's error."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from calsync.core.config.settings import Settings
from calsync.core.store import migrate, targets
from calsync.core.store.database import Database
from calsync.core.store.targets import TargetKey
from tests.cli.process import calsync, change_file, json_out


def test_events_show_says_why_a_target_waits(settings_factory: Any, tmp_path: Path) -> None:
    settings: Settings = settings_factory()
    db = Database(settings.effective_database_url)
    migrate.migrate_to(db)
    account = json_out(calsync("accounts", "add", "--tenant", "t", "--provider", "memory", "--address", "a@b.c",
                               settings=settings))["account_id"]  # fmt: skip
    receipt = json_out(calsync("submit", "--tenant", "t", "--file", change_file(tmp_path, account), settings=settings))
    due = dt.datetime(2030, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    with db.write() as conn:  # what a worker notes when a limit holds the job after the provider's 503
        targets.record_retry(conn, TargetKey("t", receipt["entity_id"], account), version=1, due_at=due,
                             wait_reason="outage suspected", error_class="ProviderUnavailable",
                             message="HTTP 503")  # fmt: skip
    db.dispose()
    [target] = json_out(calsync("events", "show", receipt["entity_id"], "--json", settings=settings))["targets"]
    assert (target["wait_reason"], target["due_at"], target["last_error"]) == (
        "outage suspected", due.isoformat(), "HTTP 503")  # fmt: skip
    table = calsync("events", "show", receipt["entity_id"], settings=settings)
    assert table.returncode == 0 and "outage suspected until 2030-01-02T03:04:05+00:00" in table.stdout, table.stdout

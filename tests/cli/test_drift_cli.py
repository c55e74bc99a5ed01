"""``calsync drift list`` (filters, keyset pages) and ``calsync drift policy`` (show, set), through the real console
script; ``calsync events show`` says when each target was last verified and what was found."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from calsync.core.config.settings import Settings
from calsync.core.drift import store
from calsync.core.drift.store import Finding
from calsync.core.store import migrate
from calsync.core.store.database import Database
from calsync.core.store.targets import TargetKey
from tests.cli.process import calsync, change_file, json_out, one_line_error

AT = dt.datetime(2026, 12, 7, 17, 30, tzinfo=dt.UTC)


@pytest.fixture
def settings(settings_factory: Any) -> Settings:
    made: Settings = settings_factory()
    db = Database(made.effective_database_url)
    migrate.migrate_to(db)
    db.dispose()
    return made


def _record(settings: Settings, *found: Finding) -> list[int]:
    db = Database(settings.effective_database_url)
    try:
        with db.write() as conn:
            return [f.id for f in store.record_findings(conn, found)]
    finally:
        db.dispose()


def test_policy_shows_the_default_and_sets_a_tenants_own(settings: Settings) -> None:
    assert json_out(calsync("drift", "policy", "acme", settings=settings)) == {"tenant_id": "acme", "policy": "report"}
    done = json_out(calsync("drift", "policy", "acme", "enforce", settings=settings))
    assert done == {"tenant_id": "acme", "policy": "enforce", "previous": "report"}
    assert json_out(calsync("drift", "policy", "acme", settings=settings))["policy"] == "enforce"
    assert json_out(calsync("drift", "policy", "other", settings=settings))["policy"] == "report"
    assert "'sometimes' is not one of 'enforce', 'report', 'off'" in one_line_error(
        calsync("drift", "policy", "acme", "sometimes", settings=settings), 2
    )
    assert "TENANT" in one_line_error(calsync("drift", "policy", "no spaces", "off", settings=settings), 2)


def test_list_filters_and_pages_by_id(settings: Settings) -> None:
    ids = _record(
        settings,
        Finding(0, "acme", "acc-1", "evt-1", "x-1", "missing", "reported", AT),
        Finding(0, "other", "acc-2", None, "x-2", "unknown_item", "repaired", AT),
        Finding(0, "acme", "acc-1", "evt-3", "x-3", "deleted_externally", "repaired", AT),
        Finding(0, "acme", "acc-1", "evt-4", "x-4", "missing", "reported", AT),
    )
    everything = json_out(calsync("drift", "list", "--json", settings=settings))
    assert [f["id"] for f in everything] == ids
    assert everything[1] == {"id": ids[1], "tenant_id": "other", "account_id": "acc-2", "event_id": None,
                             "external_id": "x-2", "kind": "unknown_item", "action": "repaired",
                             "found_at": AT.isoformat()}  # fmt: skip
    mine = json_out(calsync("drift", "list", "--tenant", "acme", "--kind", "missing", "--json", settings=settings))
    assert [f["id"] for f in mine] == [ids[0], ids[3]]

    first = calsync("drift", "list", "--tenant", "acme", "--limit", "2", "--json", settings=settings)
    assert [f["id"] for f in json_out(first)] == [ids[0], ids[2]]
    assert first.stderr.strip() == f"more findings follow: --after {ids[2]}"
    rest = calsync("drift", "list", "--tenant", "acme", "--after", str(ids[2]), "--json", settings=settings)
    assert [f["id"] for f in json_out(rest)] == [ids[3]] and rest.stderr == ""

    shown = calsync("drift", "list", "--kind", "deleted_externally", settings=settings)
    assert shown.returncode == 0 and "deleted_externally" in shown.stdout and "missing" not in shown.stdout
    assert "not a valid identifier" in one_line_error(calsync("drift", "list", "--tenant", "a b", settings=settings), 2)


def test_events_show_says_when_each_target_was_verified_and_what_was_found(settings: Settings, tmp_path: Path) -> None:
    add = ("accounts", "add", "--tenant", "t", "--provider", "memory", "--address")
    edited, intact = (json_out(calsync(*add, f"{n}@b.c", settings=settings))["account_id"] for n in ("e", "i"))
    entity = json_out(calsync("submit", "--tenant", "t", "--file", change_file(tmp_path, edited, intact),
                              settings=settings))["entity_id"]  # fmt: skip
    db = Database(settings.effective_database_url)
    with db.write() as conn:  # what a sweep records of the targets it compared
        verified = [(TargetKey("t", entity, edited), "modified_externally"), (TargetKey("t", entity, intact), None)]
        store.mark_verified(conn, verified, now=AT)  # type: ignore[arg-type]
    db.dispose()
    targets = {
        t["account_id"]: t for t in json_out(calsync("events", "show", entity, "--json", settings=settings))["targets"]
    }
    assert (targets[edited]["verified_at"], targets[edited]["drift_kind"]) == (AT.isoformat(), "modified_externally")
    assert (targets[intact]["verified_at"], targets[intact]["drift_kind"]) == (AT.isoformat(), None)
    table = calsync("events", "show", entity, settings=settings)
    assert table.returncode == 0, table.stderr
    rows = [line for line in table.stdout.splitlines() if "2026-12-07T17:30:00+00:00" in line]
    assert len(rows) == 2 and "modified_externally" in rows[0] and "as written" in rows[1], table.stdout

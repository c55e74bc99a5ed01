"""The command-line contract scripts depend on: JSON outputs, one-line errors, exit codes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from calsync.core.config.settings import Settings
from calsync.core.store import migrate
from calsync.core.store.crypto import generate_key
from calsync.core.store.database import Database
from tests.cli.process import calsync
from tests.support import Pipeline


@pytest.fixture
def settings(settings_factory: Any) -> Settings:
    built: Settings = settings_factory(secret_key=generate_key())
    migrate.migrate_to(Database(built.effective_database_url))
    return built


def _run(settings: Settings, *args: str, extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return calsync(*args, settings=settings, env=extra_env)  # the real console script, in a subprocess


def _json(result: subprocess.CompletedProcess[str]) -> Any:
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(result.stdout)


def _change(tmp_path: Path, document: Any, name: str = "change.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(document))
    return str(path)


@pytest.mark.slow
def test_accounts_submit_show_round_trip(settings: Settings, tmp_path: Path) -> None:
    account = _json(_run(settings, "accounts", "add", "--tenant", "t1", "--provider", "memory",
                         "--address", "team@example.com"))["account_id"]  # fmt: skip
    listed = _json(_run(settings, "accounts", "list", "--tenant", "t1", "--json"))
    assert [a["account_id"] for a in listed] == [account] and listed[0]["has_credentials"] is False

    change = {"operation": "upsert", "accounts": [account],
              "event": {"title": "Sprint demo", "start": "2026-12-03T15:00", "end": "2026-12-03T16:00"}}  # fmt: skip
    receipt = _json(_run(settings, "submit", "--tenant", "t1", "--file", _change(tmp_path, change)))
    assert set(receipt) >= {"entity_id", "version", "job_ids"} and receipt["version"] == 1
    assert len(receipt["job_ids"]) == 1

    shown = _json(_run(settings, "events", "show", receipt["entity_id"], "--json"))
    assert (shown["version"], shown["status"]) == (1, "confirmed")
    [target] = shown["targets"]
    assert (target["account_id"], target["status"], target["synced_version"]) == (account, "pending", 0)
    assert {"external_id", "last_error"} <= set(target)


@pytest.mark.parametrize(
    ("document", "complaint"),
    [
        ({"operation": "upsert", "accounts": ["acc_x"], "event": {"title": "x", "start": "nope", "end": "nope"}},
         "event.start"),
        ({"operation": "upsert", "accounts": ["acc_unknown"],
          "event": {"title": "x", "start": "2026-12-03T15:00", "end": "2026-12-03T16:00"}},
         "account acc_unknown does not exist for tenant t1"),
        ({"operation": "delete", "entity_id": "evt_missing"}, "event evt_missing does not exist"),
        ("not an object", "(root): must be a JSON object"),
    ],
)  # fmt: skip
def test_invalid_change_files_are_rejected_and_nothing_is_saved(
    settings: Settings, tmp_path: Path, document: Any, complaint: str
) -> None:
    result = _run(settings, "submit", "--tenant", "t1", "--file", _change(tmp_path, document))
    assert result.returncode == 2
    assert result.stderr.startswith("calsync: error: ") and complaint in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    listed = _json(_run(settings, "dlq", "list", "--json"))
    assert listed == []
    with Database(settings.effective_database_url).read() as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM events").scalar() == 0


def test_unreadable_and_malformed_files_name_the_problem(settings: Settings, tmp_path: Path) -> None:
    missing = _run(settings, "submit", "--tenant", "t1", "--file", str(tmp_path / "nope.json"))
    assert missing.returncode == 2 and "cannot read change file" in missing.stderr
    broken = tmp_path / "broken.json"
    broken.write_text('{"operation": ')
    bad = _run(settings, "submit", "--tenant", "t1", "--file", str(broken))
    assert bad.returncode == 2 and "is not valid JSON" in bad.stderr and "line 1" in bad.stderr


def test_credentials_are_refused_without_a_secret_key(settings: Settings, tmp_path: Path) -> None:
    creds = tmp_path / "creds.json"
    creds.write_text(json.dumps({"refresh_token": "1//r", "client_id": "c", "client_secret": "s"}))
    result = _run(settings, "accounts", "add", "--tenant", "t", "--provider", "google", "--address", "a@b.c",
                  "--credentials-file", str(creds), extra_env={"CALSYNC_SECRET_KEY": ""})  # fmt: skip
    assert result.returncode == 2 and "CALSYNC_SECRET_KEY is not set" in result.stderr


def test_credentials_are_stored_encrypted_and_never_listed(settings: Settings, tmp_path: Path) -> None:
    creds = tmp_path / "creds.json"
    creds.write_text(json.dumps({"refresh_token": "1//very-secret-refresh", "client_secret": "shh-secret-123",
                                 "client_id": "calsync-client"}))  # fmt: skip
    _json(_run(settings, "accounts", "add", "--tenant", "t", "--provider", "google", "--address", "a@b.c",
               "--credentials-file", str(creds)))  # fmt: skip
    listed = _run(settings, "accounts", "list", "--json")
    assert "very-secret-refresh" not in listed.stdout and json.loads(listed.stdout)[0]["has_credentials"]
    with Database(settings.effective_database_url).read() as conn:
        blob = conn.exec_driver_sql("SELECT credentials FROM provider_accounts").scalar()
    assert b"very-secret-refresh" not in bytes(blob)


def test_a_bad_setting_stops_every_command_naming_the_variable(settings: Settings) -> None:
    result = _run(settings, "accounts", "list", extra_env={"CALSYNC_RETRY_SCHEDULE": "10,soon"})
    assert result.returncode == 2 and "CALSYNC_RETRY_SCHEDULE" in result.stderr


@pytest.mark.slow
def test_dlq_list_show_replay_discard(settings: Settings, tmp_path: Path) -> None:
    pipeline = Pipeline(settings)
    try:
        account = pipeline.account()
        pipeline.provider.add_fault(error="forbidden", title="^Locked")
        locked = pipeline.submit([account], title="Locked room")
        other = pipeline.submit([account], title="Locked too")
        with pipeline.worker():
            pipeline.wait_target(locked.entity_id, account, "failed")
            pipeline.wait_target(other.entity_id, account, "failed")
            records = _json(_run(settings, "dlq", "list", "--json"))
            assert len(records) == 2
            required = {
                "id",
                "job_id",
                "job_type",
                "tenant_id",
                "entity_id",
                "account_id",
                "idempotency_key",
                "trace_id",
                "attempts",
                "last_error",
                "error_class",
                "error_history",
                "failed_at",
                "status",
            }
            assert required <= set(records[0])  # fmt: skip
            first, second = records
            assert _json(_run(settings, "dlq", "show", str(first["id"])))["job_id"] == first["job_id"]

            pipeline.provider.clear_faults()
            replay = _json(_run(settings, "dlq", "replay", str(first["id"]), "--json"))
            assert len(replay["replayed"]) == 1
            pipeline.wait_target(first["entity_id"], account, "synced")
            discard = _json(_run(settings, "dlq", "discard", str(second["id"]), "--note", "room gone"))
            assert discard == {"discarded": [{"id": second["id"], "job_id": second["job_id"]}], "skipped": []}
            assert _json(_run(settings, "dlq", "list", "--json")) == []
            everything = _json(_run(settings, "dlq", "list", "--status", "all", "--json"))
            assert sorted(r["status"] for r in everything) == ["discarded", "replayed"]
            nothing = _run(settings, "dlq", "replay")
            assert nothing.returncode == 2 and "nothing selected" in nothing.stderr
            unknown = _run(settings, "dlq", "show", "999")
            assert unknown.returncode == 2 and "does not exist" in unknown.stderr
    finally:
        pipeline.close()


def test_reconcile_prints_a_report_and_can_enqueue_for_the_workers(settings: Settings) -> None:
    report = _json(_run(settings, "reconcile", "--older-than", "0"))
    assert report["requeued"] == 0
    assert "enqueued" in _json(_run(settings, "reconcile", "--enqueue"))


def test_migrate_is_repeatable(settings: Settings) -> None:
    head = migrate.known_revisions()[-1]
    assert _json(_run(settings, "migrate")) == {"revision": head, "previous": head, "action": "unchanged"}
    assert _json(_run(settings, "migrate")) == {"revision": head, "previous": head, "action": "unchanged"}


def test_an_unmigrated_database_is_refused_with_the_fix(settings_factory: Any, tmp_path: Path) -> None:
    fresh = settings_factory(database_url=f"sqlite:///{tmp_path / 'empty.sqlite3'}")
    result = _run(fresh, "accounts", "list")
    assert result.returncode == 2 and "run `calsync migrate`" in result.stderr


def test_the_console_script_is_installed_and_answers(settings: Settings) -> None:
    script = shutil.which("calsync", path=str(Path(sys.executable).parent))
    assert script is not None
    env = {**os.environ, **settings.as_environment()}
    done = subprocess.run([script, "accounts", "list", "--json"], env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0 and json.loads(done.stdout) == []
    key = subprocess.run([script, "secret-key"], capture_output=True, text=True, check=True).stdout.strip()
    assert len(key) == 44

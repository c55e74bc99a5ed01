"""What scripts rely on, through the real ``calsync`` script: one JSON document on stdout, logs and
one-line errors on stderr, the exit codes of the README's table, and a deferred target due at once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from calsync.core.config.settings import Settings
from calsync.core.store import migrate
from calsync.core.store.crypto import generate_key
from tests.cli.process import calsync, change_file, json_out, one_line_error


@pytest.fixture
def settings(settings_factory: Any) -> Settings:
    built: Settings = settings_factory(secret_key=generate_key())
    json_out(calsync("migrate", settings=built))
    return built


def _memory_account(settings: Settings, *extra: str) -> str:
    done = calsync("accounts", "add", "--tenant", "t", "--provider", "memory", "--address", "a@b.c", *extra,
                   settings=settings)  # fmt: skip
    return str(json_out(done)["account_id"])


def test_a_duplicate_account_id_is_bad_input_in_our_words(settings: Settings) -> None:
    _memory_account(settings, "--id", "acc_room_1")
    line = one_line_error(calsync("accounts", "add", "--tenant", "t", "--provider", "memory", "--address", "x@b.c",
                                  "--id", "acc_room_1", settings=settings), 2)  # fmt: skip
    assert line == "calsync: error: account acc_room_1 already exists"


def test_an_unreachable_database_is_one_line_without_library_help(settings: Settings) -> None:
    down = "postgresql+psycopg://postgres@127.0.0.1:1/test?connect_timeout=2"
    line = one_line_error(calsync("accounts", "list", settings=settings, env={"CALSYNC_DATABASE_URL": down}), 1)
    assert line.startswith("calsync: error: database unavailable: ") and "sqlalche.me" not in line
    assert "Background" not in line and "(psycopg" not in line


@pytest.mark.slow
def test_a_submit_whose_enqueue_failed_exits_3_and_the_next_reconcile_picks_it_up(
    settings: Settings, tmp_path: Path
) -> None:
    account = _memory_account(settings)
    broker_down = {"CALSYNC_BROKER_URL": "redis://127.0.0.1:1/0"}
    done = calsync("submit", "--tenant", "t", "--file", change_file(tmp_path, account), settings=settings,
                   env=broker_down)  # fmt: skip
    receipt = json_out(done, code=3)  # stdout is still exactly the receipt
    assert receipt["deferred_accounts"] == [account] and receipt["job_ids"] == []
    assert f"calsync: deferred: saved, but the enqueue failed for {account}" in done.stderr
    shown = json_out(calsync("events", "show", receipt["entity_id"], "--json", settings=settings))
    assert shown["targets"][0]["status"] == "pending"
    # Plain reconcile (no --older-than): the deferred target is due now, not after RECONCILE_AFTER.
    report = json_out(calsync("reconcile", settings=settings))
    assert report["requeued"] == 1 and report["enqueue_failures"] == 0


@pytest.mark.slow
def test_migrate_to_a_revision_downgrades_and_an_unknown_one_is_one_line(settings: Settings) -> None:
    head, previous = migrate.known_revisions()[-1], migrate.known_revisions()[-2]
    down = json_out(calsync("migrate", "--to", previous, settings=settings))
    assert down == {"revision": previous, "previous": head, "action": "downgraded"}
    line = one_line_error(calsync("accounts", "list", settings=settings), 2)
    assert f"schema is at {previous} but this calsync needs {head}" in line
    assert json_out(calsync("migrate", settings=settings))["action"] == "upgraded"
    json_out(calsync("migrate", "--to", previous, settings=settings))
    up = json_out(calsync("migrate", "--to", "head", settings=settings))  # Alembic's own name for the newest
    assert up == {"revision": head, "previous": previous, "action": "upgraded"}
    assert json_out(calsync("migrate", "--to", "head", settings=settings))["action"] == "unchanged"
    line = one_line_error(calsync("migrate", "--to", "9999", settings=settings), 2)
    assert line.startswith("calsync: error: unknown revision '9999': this calsync knows 0001, 0002")
    assert "Traceback" not in line


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        (["submit", "--file", "x.json"], "Missing option '--tenant'. (see `calsync submit --help`)"),
        (["nosuch"], "No such command 'nosuch'."),
        (["dlq", "show", "abc"], "'abc' is not a valid integer."),
    ],
)
def test_usage_errors_are_one_line_with_exit_2(args: list[str], complaint: str) -> None:
    assert complaint in one_line_error(calsync(*args), 2)

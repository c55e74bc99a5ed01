"""Fail closed on configuration, and no stray daemons: the real ``calsync`` script in a subprocess."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from calsync.core.config.settings import Settings
from calsync.core.store.crypto import generate_key
from tests.cli.process import calsync, change_file, json_out, one_line_error, redis_servers_of


def _embedded_env(data_dir: Path, **extra: str) -> dict[str, str]:
    return {"CALSYNC_DATA_DIR": str(data_dir), **extra}


def test_a_configured_database_without_a_broker_is_refused_and_starts_nothing(tmp_path: Path, database: str) -> None:
    done = calsync("status", "--json", env=_embedded_env(tmp_path, CALSYNC_DATABASE_URL=database))
    line = one_line_error(done, 2)
    assert "CALSYNC_BROKER_URL is not set" in line and "CALSYNC_EMBEDDED_REDIS=1" in line
    assert redis_servers_of(tmp_path) == [] and not (tmp_path / "redis" / "server.json").exists()


def test_the_embedded_redis_is_allowed_with_a_database_only_when_asked_for(tmp_path: Path) -> None:
    sqlite = f"sqlite:///{tmp_path / 'db.sqlite3'}"
    env = _embedded_env(tmp_path, CALSYNC_DATABASE_URL=sqlite, CALSYNC_EMBEDDED_REDIS="1")
    json_out(calsync("migrate", env=env))
    account = json_out(calsync("accounts", "add", "--tenant", "t", "--provider", "memory", "--address", "a@b.c",
                               env=env))["account_id"]  # fmt: skip
    change = change_file(tmp_path, account)
    try:
        receipt = json_out(calsync("submit", "--tenant", "t", "--file", change, env=env))
        assert len(receipt["job_ids"]) == 1 and redis_servers_of(tmp_path)
    finally:
        assert json_out(calsync("stop", env=env))["stopped"] is True
    assert redis_servers_of(tmp_path) == []


@pytest.mark.parametrize(
    ("variable", "value", "complaint"),
    [
        ("CALSYNC_RETRY_SCHEDUL", "5", "unknown variable CALSYNC_RETRY_SCHEDUL (did you mean CALSYNC_RETRY_SCHEDULE?)"),
        ("CALSYNC_BROKER_ULR", "redis://x", "did you mean CALSYNC_BROKER_URL?"),
        ("CALSYNC_RETRY_SCHEDULE", "100000000", "CALSYNC_RETRY_SCHEDULE: every delay must be at most 86400 seconds"),
        ("CALSYNC_LOCK_RETRY_DELAY", "700000", "CALSYNC_LOCK_RETRY_DELAY: must be at most 86400"),
        ("CALSYNC_LOCK_TTL", "soon", "CALSYNC_LOCK_TTL: must be a number, got 'soon'"),
        ("CALSYNC_EMBEDDED_REDIS", "maybe", "CALSYNC_EMBEDDED_REDIS: must be 1 or 0"),
    ],
)
def test_misspelt_and_unbounded_settings_stop_the_command(
    tmp_path: Path, variable: str, value: str, complaint: str
) -> None:
    line = one_line_error(calsync("status", "--json", env=_embedded_env(tmp_path, **{variable: value})), 2)
    assert complaint in line and "Input should" not in line and "Value error" not in line
    assert redis_servers_of(tmp_path) == []


def test_an_unknown_variable_stops_even_commands_that_read_no_settings(tmp_path: Path) -> None:
    line = one_line_error(calsync("secret-key", env={"CALSYNC_SECRET_KEYZ": "x"}), 2)
    assert "(did you mean CALSYNC_SECRET_KEY?)" in line


def test_a_worker_refuses_to_start_without_a_key_or_with_a_wrong_one_when_credentials_are_stored(
    settings_factory: Any, tmp_path: Path
) -> None:
    settings: Settings = settings_factory(secret_key=generate_key())
    json_out(calsync("migrate", settings=settings))
    creds = tmp_path / "creds.json"
    creds.write_text(json.dumps({"type": "authorized_user", "client_id": "c", "client_secret": "s3cr3t-value",
                                 "refresh_token": "1//refresh-value"}))  # fmt: skip
    json_out(calsync("accounts", "add", "--tenant", "t", "--provider", "google", "--address", "a@b.c",
                     "--credentials-file", str(creds), settings=settings))  # fmt: skip
    line = one_line_error(calsync("worker", settings=settings, env={"CALSYNC_SECRET_KEY": ""}, timeout=30), 2)
    assert "CALSYNC_SECRET_KEY is not set but 1 account(s) have stored credentials" in line
    # A second `calsync secret-key` pasted over the first: the worker stops at start, it dead-letters nothing.
    wrong = calsync("worker", settings=settings, env={"CALSYNC_SECRET_KEY": generate_key()}, timeout=30)
    line = one_line_error(wrong, 2)
    assert "CALSYNC_SECRET_KEY (or CALSYNC_SECRET_KEYS) decrypts none of the 1 stored credentials" in line


@pytest.mark.slow
def test_read_only_commands_leave_no_daemon_and_queue_commands_start_the_embedded_redis(tmp_path: Path) -> None:
    env = _embedded_env(tmp_path)
    try:
        _read_only_then_submit(env, tmp_path)
    finally:
        calsync("stop", env=env)  # also when an assertion failed: the test must not leave a server either
    assert redis_servers_of(tmp_path) == []


def _read_only_then_submit(env: dict[str, str], tmp_path: Path) -> None:
    account = json_out(calsync("accounts", "add", "--tenant", "t", "--provider", "memory", "--address", "a@b.c",
                               env=env))["account_id"]  # fmt: skip
    assert redis_servers_of(tmp_path) == []
    for command in (["accounts", "list", "--json"], ["dlq", "list", "--json"], ["migrate"]):
        json_out(calsync(*command, env=env))
        assert redis_servers_of(tmp_path) == [], command
    status = json_out(calsync("status", "--json", env=env), 1)  # Redis is a source it could not read: exit 1
    assert "embedded-redis-not-running" in status["errors"]["redis"] and redis_servers_of(tmp_path) == []

    change = change_file(tmp_path, account)
    json_out(calsync("submit", "--tenant", "t", "--file", change, env=env))
    [server] = redis_servers_of(tmp_path)
    status = json_out(calsync("status", "--json", env=env))  # reuses the running server, starts none
    assert status["queues"][0]["ready"] == 1 and redis_servers_of(tmp_path) == [server]


def test_the_dramatiq_worker_process_refuses_too(settings_factory: Any) -> None:
    from calsync.actors.worker import build_worker
    from calsync.core.model.errors import ConfigurationError
    from calsync.core.store import accounts, migrate
    from calsync.core.store.crypto import CredentialCipher
    from calsync.core.store.database import Database

    settings: Settings = settings_factory()
    db = Database(settings.effective_database_url)
    migrate.migrate_to(db)
    with db.write() as conn:
        blob = CredentialCipher(generate_key()).encrypt({"refresh_token": "1//r"})
        accounts.add_account(conn, tenant_id="t", provider="google", address="a@b.c", credentials=blob, options={})
    db.dispose()
    with pytest.raises(ConfigurationError, match="CALSYNC_SECRET_KEY is not set but 1 account"):
        build_worker(settings)

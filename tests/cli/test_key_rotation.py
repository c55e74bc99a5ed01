"""Secret-key rotation: CALSYNC_SECRET_KEYS (newest first) and ``calsync secret-key rotate``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from calsync.core.config.settings import Settings
from calsync.core.model.errors import ConfigurationError
from calsync.core.store.crypto import CredentialCipher, generate_key
from calsync.core.store.database import Database
from calsync.core.store.key_rotation import rotate_credentials
from tests.cli.process import calsync, json_out, one_line_error

CREDENTIALS = {"type": "authorized_user", "client_id": "c", "client_secret": "s3cr3t-value", "refresh_token": "1//r"}


def _blobs(settings: Settings) -> list[bytes]:
    with Database(settings.effective_database_url).read() as conn:
        rows = conn.exec_driver_sql("SELECT credentials FROM provider_accounts ORDER BY id").all()
    return [bytes(row[0]) for row in rows]


def _accounts_with_credentials(settings: Settings, tmp_path: Path, count: int) -> None:
    creds = tmp_path / "creds.json"
    creds.write_text(json.dumps(CREDENTIALS))
    for n in range(count):
        json_out(calsync("accounts", "add", "--tenant", "t", "--provider", "google", "--address", f"r{n}@b.c",
                         "--credentials-file", str(creds), settings=settings))  # fmt: skip


@pytest.mark.slow
def test_rotate_re_encrypts_with_the_newest_key_and_is_idempotent(settings_factory: Any, tmp_path: Path) -> None:
    old, new = generate_key(), generate_key()
    settings: Settings = settings_factory(secret_key=old)
    json_out(calsync("migrate", settings=settings))
    _accounts_with_credentials(settings, tmp_path, 3)
    both = {"CALSYNC_SECRET_KEY": "", "CALSYNC_SECRET_KEYS": f"{new},{old}"}

    done = calsync("secret-key", "rotate", "--batch", "2", settings=settings, env=both)
    assert json_out(done) == {"accounts_with_credentials": 3, "rotated": 3, "already_current": 0,
                              "changed_meanwhile": 0}  # fmt: skip
    again = json_out(calsync("secret-key", "rotate", settings=settings, env=both))
    assert (again["rotated"], again["already_current"]) == (0, 3)

    for blob in _blobs(settings):
        assert CredentialCipher([new]).decrypt(blob) == CREDENTIALS
        with pytest.raises(ConfigurationError, match="cannot be decrypted"):
            CredentialCipher([old]).decrypt(blob)
    # The old key can go: the new one alone lists and serves the accounts.
    only_new = {"CALSYNC_SECRET_KEY": new}
    assert len(json_out(calsync("accounts", "list", "--json", settings=settings, env=only_new))) == 3


@pytest.mark.slow
def test_a_rotation_stopped_half_way_resumes(settings_factory: Any, tmp_path: Path) -> None:
    old, new = generate_key(), generate_key()
    settings: Settings = settings_factory(secret_key=old)
    json_out(calsync("migrate", settings=settings))
    _accounts_with_credentials(settings, tmp_path, 3)
    db = Database(settings.effective_database_url)
    cipher = CredentialCipher([new, old])

    def crash(_done: int) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        rotate_credentials(db, cipher, batch=2, on_progress=crash)
    assert sum(cipher.is_current(b) for b in _blobs(settings)) == 2  # the first batch committed
    report = rotate_credentials(db, cipher, batch=2, on_progress=lambda _done: None)
    assert (report.rotated, report.already_current) == (1, 2)
    db.dispose()


def test_new_credentials_are_encrypted_with_the_first_key(settings_factory: Any, tmp_path: Path) -> None:
    old, new = generate_key(), generate_key()
    settings: Settings = settings_factory(secret_keys=(new, old))
    json_out(calsync("migrate", settings=settings))
    _accounts_with_credentials(settings, tmp_path, 1)
    [blob] = _blobs(settings)
    assert CredentialCipher([new]).decrypt(blob) == CREDENTIALS


def test_a_single_key_outside_the_key_list_is_refused(settings_factory: Any) -> None:
    settings: Settings = settings_factory()
    env = {"CALSYNC_SECRET_KEY": generate_key(), "CALSYNC_SECRET_KEYS": generate_key()}
    line = one_line_error(calsync("accounts", "list", settings=settings, env=env), 2)
    assert "CALSYNC_SECRET_KEY is set but not among CALSYNC_SECRET_KEYS" in line
    bad = one_line_error(calsync("accounts", "list", settings=settings, env={"CALSYNC_SECRET_KEYS": "nope"}), 2)
    assert "CALSYNC_SECRET_KEYS: key 1 must be 32 url-safe base64-encoded bytes" in bad

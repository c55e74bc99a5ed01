"""A worker without a secret key refuses to start once any account holds credentials (each job would fail), and
so does one whose keys open none of the stored credentials (a wrong CALSYNC_SECRET_KEY).

The refusal of `calsync worker` and of a worker process built directly: tests/cli/test_fail_closed.py.
"""

from __future__ import annotations

import pytest

from calsync.core.model.errors import ConfigurationError, SecretKeyMismatch
from calsync.core.store import accounts
from calsync.core.store.crypto import CredentialCipher, generate_key
from calsync.core.store.database import Database
from calsync.core.store.key_rotation import CHECK_BATCH, require_secret_key
from calsync.core.webhooks import store

pytestmark = pytest.mark.both_databases


def _store_credentials(db: Database, key: str, address: str = "a@example.com") -> None:
    with db.write() as conn:
        accounts.add_account(conn, tenant_id="t", provider="google", address=address,
                             credentials=CredentialCipher(key).encrypt({"refresh_token": "r"}), options={})  # fmt: skip


def test_without_a_key_credentials_stop_the_worker_and_with_one_they_do_not(db: Database) -> None:
    require_secret_key(CredentialCipher(None), db)  # nothing stored: nothing to refuse
    key = generate_key()
    _store_credentials(db, key)
    with pytest.raises(ConfigurationError, match="CALSYNC_SECRET_KEY is not set but 1 account"):
        require_secret_key(CredentialCipher(None), db)
    require_secret_key(CredentialCipher(key), db)


def test_a_key_that_opens_none_of_the_stored_credentials_stops_the_worker(db: Database) -> None:
    stored_with, other = generate_key(), generate_key()
    _store_credentials(db, stored_with)
    with pytest.raises(
        SecretKeyMismatch, match=r"^CALSYNC_SECRET_KEY \(or CALSYNC_SECRET_KEYS\) decrypts none of the 1"
    ):
        require_secret_key(CredentialCipher(other), db)  # e.g. a second `calsync secret-key` pasted over the first
    require_secret_key(CredentialCipher(stored_with), db)
    require_secret_key(CredentialCipher([other, stored_with]), db)  # rotating: the old key still decrypts
    _store_credentials(db, other, "b@example.com")
    require_secret_key(CredentialCipher(other), db)  # opens one of two: starts (the other's jobs are held)


def test_the_check_reads_every_stored_secret_in_batches_webhook_endpoints_too(db: Database) -> None:
    wrong, right = generate_key(), generate_key()
    with db.write() as conn:
        for n in range(CHECK_BATCH + 1):  # more than one batch of accounts the key cannot open
            accounts.add_account(conn, tenant_id="t", provider="memory", address=f"a{n}@example.com",
                                 credentials=CredentialCipher(wrong).encrypt({"n": n}), options={},
                                 account_id=f"acc_{n:04d}")  # fmt: skip
    with pytest.raises(SecretKeyMismatch, match=f"none of the {CHECK_BATCH + 1} stored credentials"):
        require_secret_key(CredentialCipher(right), db)
    with db.write() as conn:  # only a webhook endpoint's signing secret is stored with the right key
        cipher = CredentialCipher(right)
        store.create_endpoint(conn, cipher, tenant_id="t", url="https://example.com/hook", events=["sync.succeeded"])
    require_secret_key(CredentialCipher(right), db)

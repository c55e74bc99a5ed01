"""A worker without a secret key refuses to start once any account holds credentials (each job would fail).

The refusal of `calsync worker` and of a worker process built directly: tests/cli/test_fail_closed.py.
"""

from __future__ import annotations

import pytest

from calsync.core.model.errors import ConfigurationError
from calsync.core.store import accounts
from calsync.core.store.crypto import CredentialCipher, generate_key
from calsync.core.store.database import Database
from calsync.core.store.key_rotation import require_secret_key

pytestmark = pytest.mark.both_databases


def _store_credentials(db: Database, key: str) -> None:
    with db.write() as conn:
        accounts.add_account(conn, tenant_id="t", provider="google", address="a@example.com",
                             credentials=CredentialCipher(key).encrypt({"refresh_token": "r"}), options={})  # fmt: skip


def test_without_a_key_credentials_stop_the_worker_and_with_one_they_do_not(db: Database) -> None:
    require_secret_key(CredentialCipher(None), db)  # nothing stored: nothing to refuse
    key = generate_key()
    _store_credentials(db, key)
    with pytest.raises(ConfigurationError, match="CALSYNC_SECRET_KEY is not set but 1 account"):
        require_secret_key(CredentialCipher(None), db)
    require_secret_key(CredentialCipher(key), db)


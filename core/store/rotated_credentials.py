"""Writes back credentials a provider rotated (a new refresh token), encrypted, onto the account row."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from calsync.core.store import accounts
from calsync.core.store.crypto import CredentialCipher
from calsync.core.store.database import Database


class StoredCredentials:
    """The worker's :class:`~calsync.core.model.adapter_parts.CredentialWriter`: the account row holds the newest."""

    def __init__(self, db: Database, cipher: CredentialCipher) -> None:
        self._db = db
        self._cipher = cipher

    def save(self, account_id: str, credentials: Mapping[str, Any]) -> None:
        """Encrypt and store; the status is left alone (a rotation is not a re-authorization)."""
        blob = self._cipher.encrypt(credentials)
        with self._db.write() as conn:
            accounts.update_account(conn, account_id, credentials=blob)

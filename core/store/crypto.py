"""Credentials at rest: Fernet-encrypted JSON blobs, keyed by ``CALSYNC_SECRET_KEY``."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from cryptography.fernet import Fernet, InvalidToken

from calsync.core.model.errors import ConfigurationError


def generate_key() -> str:
    """A fresh key for ``CALSYNC_SECRET_KEY``."""
    return Fernet.generate_key().decode()


class CredentialCipher:
    """Encrypts credentials on the way into the database and decrypts them for the adapters."""

    def __init__(self, secret_key: str | None) -> None:
        self._fernet: Fernet | None = None
        if secret_key:
            try:
                self._fernet = Fernet(secret_key.encode())
            except (ValueError, TypeError):
                raise ConfigurationError(
                    "CALSYNC_SECRET_KEY: must be 32 url-safe base64-encoded bytes (make one with `calsync secret-key`)"
                ) from None

    def _require(self, action: str) -> Fernet:
        if self._fernet is None:
            raise ConfigurationError(f"CALSYNC_SECRET_KEY is not set; refusing to {action} credentials")
        return self._fernet

    def encrypt(self, credentials: Mapping[str, Any]) -> bytes:
        """Serialize and encrypt; refuses when no key is configured (secrets are never stored in clear)."""
        return self._require("store").encrypt(json.dumps(dict(credentials), sort_keys=True).encode())

    def decrypt(self, blob: bytes) -> dict[str, Any]:
        """Decrypt a stored blob; a wrong key is a configuration error, not data corruption."""
        try:
            value = json.loads(self._require("read").decrypt(blob))
        except InvalidToken:
            raise ConfigurationError("stored credentials cannot be decrypted with CALSYNC_SECRET_KEY") from None
        if not isinstance(value, dict):
            raise ConfigurationError("stored credentials are not a JSON object")
        return value

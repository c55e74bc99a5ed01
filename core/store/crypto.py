"""Credentials at rest: Fernet-encrypted JSON blobs, keyed by ``CALSYNC_SECRET_KEYS`` (or ``CALSYNC_SECRET_KEY``).

Several keys make rotation possible (docs/RUNBOOK.md): the first encrypts, every one decrypts, and
:meth:`CredentialCipher.rotate` re-encrypts a blob under the first key.

A worker decrypts its account's blob on every job, and the blob rarely changes, so the plaintext of
the last :data:`KEPT_PLAINTEXTS` blobs is kept (functools.lru_cache, keyed by the blob) rather than
checked and decrypted again (docs/notes/performance.md). A changed credential is a new blob (a fresh
IV), so it is decrypted anew; each call still parses its own dict, so no caller sees another's changes.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from typing import Any

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

from calsync.core.model.errors import ConfigurationError, SecretKeyMismatch

UNREADABLE = "stored credentials cannot be decrypted with any configured key (CALSYNC_SECRET_KEY, CALSYNC_SECRET_KEYS)"

#: How many blobs' plaintexts a cipher keeps (one per account a worker syncs; a blob is about 2.5 KB).
KEPT_PLAINTEXTS = 1024


def generate_key() -> str:
    """A fresh key for ``CALSYNC_SECRET_KEY`` (or the head of ``CALSYNC_SECRET_KEYS``)."""
    return Fernet.generate_key().decode()


def _fernet(key: str, position: int) -> Fernet:
    try:
        return Fernet(key.encode())
    except (ValueError, TypeError):
        where = "CALSYNC_SECRET_KEY" if position == 0 else f"key {position + 1} of CALSYNC_SECRET_KEYS"
        raise ConfigurationError(
            f"{where}: must be 32 url-safe base64-encoded bytes (make one with `calsync secret-key`)"
        ) from None


def _decrypts(fernet: Fernet | MultiFernet | None, blob: bytes) -> bool:
    if fernet is None:
        return False
    try:
        fernet.decrypt(bytes(blob))
    except InvalidToken:
        return False
    return True


class CredentialCipher:
    """Encrypts credentials on the way into the database and decrypts them for the adapters."""

    def __init__(self, keys: Sequence[str] | str | None) -> None:
        given = [keys] if isinstance(keys, str) else list(keys or ())
        given = [k for k in given if k]
        self._fernet = MultiFernet([_fernet(k, i) for i, k in enumerate(given)]) if given else None
        self._current = _fernet(given[0], 0) if given else None
        self._plaintext = functools.lru_cache(maxsize=KEPT_PLAINTEXTS)(self._open)

    @property
    def configured(self) -> bool:
        """Whether any key is set (a worker refuses to start without one when accounts carry credentials)."""
        return self._fernet is not None

    def _require(self, action: str) -> MultiFernet:
        if self._fernet is None:
            raise ConfigurationError(f"CALSYNC_SECRET_KEY is not set; refusing to {action} credentials")
        return self._fernet

    def encrypt(self, credentials: Mapping[str, Any]) -> bytes:
        """Serialize and encrypt with the newest key; refuses when no key is configured (never stored in clear)."""
        return self._require("store").encrypt(json.dumps(dict(credentials), sort_keys=True).encode())

    def decrypt(self, blob: bytes) -> dict[str, Any]:
        """Decrypt a stored blob with any configured key; a wrong key is a configuration error, not corruption."""
        value: dict[str, Any] = json.loads(self._plaintext(bytes(blob)))
        return value

    def _open(self, blob: bytes) -> bytes:
        try:
            return self._require("read").decrypt(blob)
        except InvalidToken:
            raise SecretKeyMismatch(UNREADABLE) from None

    def opens(self, blob: bytes) -> bool:
        """Whether any configured key decrypts ``blob`` (a worker's start-up check; nothing is kept)."""
        return _decrypts(self._fernet, blob)

    def is_current(self, blob: bytes) -> bool:
        """Whether the blob is already encrypted with the newest key (rotation skips it)."""
        return _decrypts(self._current, blob)

    def rotate(self, blob: bytes) -> bytes:
        """The same credentials encrypted with the newest key (a fresh token: new timestamp and IV)."""
        try:
            return self._require("rotate").rotate(bytes(blob))
        except InvalidToken:
            raise SecretKeyMismatch(UNREADABLE) from None

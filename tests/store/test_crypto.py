"""The credential cipher: a blob's plaintext is kept, each caller still gets a dict of its own."""

from __future__ import annotations

import pytest
from cryptography.fernet import MultiFernet

from calsync.core.model.errors import ConfigurationError
from calsync.core.store.crypto import KEPT_PLAINTEXTS, CredentialCipher, generate_key

CREDENTIALS = {"client_email": "svc@example.iam.gserviceaccount.com", "private_key": "-----BEGIN PRIVATE KEY-----x"}


@pytest.fixture
def fernet_calls(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    calls: list[bytes] = []
    real = MultiFernet.decrypt

    def counted(self: MultiFernet, token: bytes | str, ttl: int | None = None) -> bytes:
        calls.append(bytes(token, "ascii") if isinstance(token, str) else token)
        return real(self, token, ttl)

    monkeypatch.setattr(MultiFernet, "decrypt", counted)
    return calls


def test_a_blob_is_decrypted_once_and_each_caller_gets_its_own_dict(fernet_calls: list[bytes]) -> None:
    cipher = CredentialCipher(generate_key())
    blob = cipher.encrypt(CREDENTIALS)
    first = cipher.decrypt(blob)
    first["private_key"] = "changed by a caller"
    assert cipher.decrypt(memoryview(blob)) == CREDENTIALS  # a driver may hand the column over as a memoryview
    assert fernet_calls == [blob]


def test_a_new_blob_of_the_same_credentials_is_decrypted_anew(fernet_calls: list[bytes]) -> None:
    cipher = CredentialCipher(generate_key())
    old, new = cipher.encrypt(CREDENTIALS), cipher.encrypt({**CREDENTIALS, "private_key": "rotated"})
    assert cipher.decrypt(old) == CREDENTIALS
    assert cipher.decrypt(new)["private_key"] == "rotated"
    assert fernet_calls == [old, new]


def test_the_kept_plaintexts_are_bounded(fernet_calls: list[bytes]) -> None:
    cipher = CredentialCipher(generate_key())
    blobs = [cipher.encrypt({"n": n}) for n in range(KEPT_PLAINTEXTS + 1)]
    for blob in blobs:
        cipher.decrypt(blob)
    cipher.decrypt(blobs[0])  # the oldest was dropped to keep the bound
    assert len(fernet_calls) == KEPT_PLAINTEXTS + 2


def test_a_blob_no_key_opens_is_refused_every_time(fernet_calls: list[bytes]) -> None:
    blob = CredentialCipher(generate_key()).encrypt(CREDENTIALS)
    other = CredentialCipher(generate_key())
    for _ in range(2):  # a refusal is not kept: a key added later (a restart) must still be tried
        with pytest.raises(ConfigurationError, match="cannot be decrypted"):
            other.decrypt(blob)
    assert len(fernet_calls) == 2
    with pytest.raises(ConfigurationError, match="not set"):
        CredentialCipher(None).decrypt(blob)

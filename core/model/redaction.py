"""Secret masking, one scrubber for the whole process: log lines, DLQ records and adapters' error messages.

Credentials are registered when they are decrypted (:func:`register_secrets`) and masked wherever they
later appear; an adapter may also pass the secrets of the call at hand. Token-shaped strings (bearer
tokens, Google access and refresh tokens, JWTs, private keys, ``password=...`` pairs) are masked by
pattern as a second line of defence.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

MASK = "***"

#: Shorter strings are never treated as secrets: masking them would garble ordinary words.
MIN_REGISTERED = 6
MIN_GIVEN = 4
_MIN_LINE = 16

_secrets: set[str] = set()
_secrets_lock = threading.Lock()
_secrets_snapshot: tuple[str, ...] = ()

# A pattern's first group, when it has one, is kept: "Bearer ***", "password=***".
_PATTERNS = (
    re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]{8,}"),
    re.compile(r"\bya29\.[A-Za-z0-9._-]+"),
    re.compile(r"\b1//[\w.-]+"),
    re.compile(r"\beyJ[\w-]+\.[\w-]+\.[\w-]*"),
    re.compile(
        r"(?i)([\"']?(?:access_token|refresh_token|id_token|client_secret|password|private_key|assertion)[\"']?"
        r"\s*[:=]\s*[\"']?)[^\"'&\s,}]+"
    ),
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", re.S),
    re.compile(r"(?i)(authorization:\s*basic\s+)[A-Za-z0-9+/=]+"),
)


def register_secrets(values: Any) -> None:
    """Remember every string in a credentials structure so it is masked wherever it later appears."""
    global _secrets_snapshot
    found = set(_walk_strings(values))
    if not found - _secrets:
        return
    with _secrets_lock:
        _secrets.update(found)
        # Longest first, so a secret containing another is masked whole.
        _secrets_snapshot = tuple(sorted(_secrets, key=len, reverse=True))


def _walk_strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        if len(value) >= MIN_REGISTERED:
            yield value
            for line in value.splitlines():
                if len(line.strip()) >= _MIN_LINE:
                    yield line.strip()
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _walk_strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _walk_strings(item)


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """The text with ``secrets``, every registered secret and token-shaped strings masked."""
    given = sorted((s for s in secrets if len(s) >= MIN_GIVEN), key=len, reverse=True)
    for secret in (*given, *_secrets_snapshot):
        if secret in text:
            text = text.replace(secret, MASK)
    for pattern in _PATTERNS:
        text = pattern.sub(lambda m: (m.group(1) if m.groups() else "") + MASK, text)
    return text

"""Secret masking, one scrubber for the whole process: log lines, DLQ records and adapters' error messages.

Credentials are registered when they are decrypted (:func:`register_secrets`): only the values of
secret fields (:data:`SECRET_FIELDS`, and names ending in ``_secret``, ``_password``, ``_token``,
``_private_key``), so identifiers such as ``client_id``, ``token_uri`` or a username stay readable in
messages. Registered values are masked wherever they later appear; an adapter may also pass the
secrets of the call at hand. Token-shaped strings (bearer tokens, Google access and refresh tokens,
JWTs, private keys, ``password=...`` pairs) are masked by pattern as a second line of defence.

Only whole values that look like secrets are masked wherever they appear (:func:`maskable`): at least
``MIN_REGISTERED`` characters (``MIN_GIVEN`` for a call's own), and not an ordinary word. A value such as
``revoked`` (a test user's refresh token) would otherwise turn Google's "Token has been expired or
revoked." into "... or ***." in every message; such a value is masked only where the patterns find it,
after its field's name (``"refresh_token": "***"``, ``password=***``).
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

#: An ordinary word (``revoked``, ``Token``, ``ERROR``): shorter than this, never masked by value.
_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+")
_WORD_MAX = 16

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

#: Credential fields whose values are secrets (compared lower-case); see also :data:`_SECRET_SUFFIXES`.
SECRET_FIELDS = frozenset(
    {
        "secret", "client_secret", "refresh_token", "access_token", "id_token", "token", "password",
        "passphrase", "private_key", "private_key_id", "certificate", "certificate_pem", "key_pem",
        "api_key", "assertion",
    }
)  # fmt: skip
_SECRET_SUFFIXES = ("_secret", "_password", "_token", "_private_key")


def is_secret_field(name: str) -> bool:
    """Whether a credentials field holds a secret (masked) rather than an identifier (kept)."""
    lowered = name.lower()
    return lowered in SECRET_FIELDS or lowered.endswith(_SECRET_SUFFIXES)


def _strings(value: Any, secret: bool) -> Iterator[str]:
    """The maskable strings of a credentials structure under secret fields (all of them when ``secret``)."""
    if isinstance(value, str):
        if secret and maskable(value):
            yield value
            yield from (line.strip() for line in value.splitlines() if len(line.strip()) >= _MIN_LINE)
    elif isinstance(value, Mapping):
        for name, item in value.items():
            yield from _strings(item, secret or is_secret_field(str(name)))
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item, secret)


def register_secrets(values: Any) -> None:
    """Remember secrets (strings, or a credentials mapping's secret fields) to mask wherever they later appear."""
    global _secrets_snapshot
    given = values if isinstance(values, list | tuple) else [values]
    # Strings given directly are secrets; in a mapping only the values of secret fields are.
    found = {s for item in given for s in _strings(item, secret=isinstance(item, str))}
    if not found - _secrets:
        return
    with _secrets_lock:
        _secrets.update(found)
        # Longest first, so a secret containing another is masked whole.
        _secrets_snapshot = tuple(sorted(_secrets, key=len, reverse=True))


def maskable(value: str, minimum: int = MIN_REGISTERED) -> bool:
    """Whether a secret's value is masked wherever it appears: long enough, and not an ordinary word."""
    return len(value) >= minimum and (len(value) >= _WORD_MAX or _WORD.fullmatch(value) is None)


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """The text with ``secrets``, every registered secret and token-shaped strings masked."""
    given = sorted((s for s in secrets if maskable(s, MIN_GIVEN)), key=len, reverse=True)
    for secret in (*given, *_secrets_snapshot):
        if secret in text:
            text = text.replace(secret, MASK)
    for pattern in _PATTERNS:
        text = pattern.sub(lambda m: (m.group(1) if m.groups() else "") + MASK, text)
    return text

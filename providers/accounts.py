"""What every adapter does with an account's fields: validates them (errors name the field, never a value),
fingerprints them, and keeps what it builds from them (credentials, a connected mailbox, a token source) per
account until they change.
"""

from __future__ import annotations

import collections
import hashlib
import json
import threading
from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, ValidationError

from calsync.core.model.errors import ConfigurationError
from calsync.core.model.redaction import is_secret_field
from calsync.core.model.validation_wording import field_message

T = TypeVar("T")
#: How many accounts' built objects an adapter keeps (one per account a worker syncs).
KEPT_ACCOUNTS = 1024


class Fields(BaseModel):
    """An account's options or credentials as an adapter reads them: unknown keys refused."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def validated(model: type[BaseModel], data: Any, where: str, section: str) -> Any:
    """``data`` validated by ``model``; a failure is a ConfigurationError naming each field (``section.field``).

    Built from locations and messages only: pydantic's own text would echo the (secret) input. The tag of a
    discriminated union (``credentials.client_credentials.client_id``) is left out of a location.
    """
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        tags = {str(data["type"])} if isinstance(data, Mapping) and "type" in data else set()
        problems = []
        for err in exc.errors():
            loc = [str(p) for p in err["loc"]]
            if len(loc) > 1 and loc[0] in tags:
                loc = loc[1:]
            problems.append(f"{'.'.join([section, *loc])}: {field_message(err)}")
        raise ConfigurationError(f"{where}: {'; '.join(problems)}") from None


def url_check(value: str, *, https_only: bool, example: str) -> str:
    """A pydantic check: ``value`` is an absolute https URL (or http, unless ``https_only``), as ``example`` is."""
    parts = urlsplit(value)
    if parts.scheme not in (("https",) if https_only else ("http", "https")) or not parts.netloc:
        raise ValueError(f"must be an {'https' if https_only else 'http(s)'} URL such as {example}")
    return value


def secret_values(credentials: Mapping[str, Any]) -> tuple[str, ...]:
    """The values of an account's secret fields (as core/model/redaction.py names them), masked in every message
    about the account."""
    return tuple(str(value) for name, value in credentials.items() if value and is_secret_field(name))


def fingerprint(address: str, credentials: Mapping[str, Any], options: Mapping[str, Any]) -> str:
    """Identifies an account's login and options without revealing them (a changed value, a new fingerprint)."""
    identity = {"address": address.lower(), "credentials": dict(credentials), "options": dict(options)}
    return hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()


class _Entry(Generic[T]):
    def __init__(self, fingerprint: str) -> None:
        self.fingerprints = {fingerprint}
        self.lock = threading.Lock()
        self.value: T | None = None


class AccountCache(Generic[T]):
    """What an adapter built for each account, by account id: built once per fingerprint, by one thread while the
    others wait for it, without holding up other accounts meanwhile; the newest :data:`KEPT_ACCOUNTS` kept."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: collections.OrderedDict[str, _Entry[T]] = collections.OrderedDict()

    def get(self, account_id: str, fingerprint: str, build: Callable[[set[str]], T]) -> T:
        """The account's object, built by ``build(fingerprints)`` when missing or when its fingerprint is not one of
        the entry's (``build`` may add to that set: a rotated token the account will carry once stored)."""
        with self._lock:
            entry = self._entries.get(account_id)
            if entry is None or fingerprint not in entry.fingerprints:
                entry = self._entries[account_id] = _Entry(fingerprint)
            self._entries.move_to_end(account_id)
            while len(self._entries) > KEPT_ACCOUNTS:
                self._entries.popitem(last=False)
        with entry.lock:
            if entry.value is None:
                entry.value = build(entry.fingerprints)
            return entry.value

    def evict(self, account_id: str) -> None:
        """Forget the account's object, so the next call builds it afresh (after an auth or configuration failure)."""
        with self._lock:
            self._entries.pop(account_id, None)

    def drain(self) -> list[T]:
        """Forget every object, returning the built ones (to close them)."""
        with self._lock:
            entries, self._entries = list(self._entries.values()), collections.OrderedDict()
        return [entry.value for entry in entries if entry.value is not None]

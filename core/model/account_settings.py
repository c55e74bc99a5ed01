"""An account's settings as an adapter derives them (its validated options and credentials), per account identity.

An adapter validates an account's options and credentials on every job; :func:`settings_per_account` keeps
the last ``maxsize`` results of such a reader, keyed by everything it reads: the account's id and
address and the items of its options and credentials with each value's type (``True == 1 == 1.0``, yet
validation tells them apart). A changed value is a new key; only successes are kept (``lru_cache`` keeps no
exception), so an invalid account is reported on every call; an account with a value that cannot be a key
(a list, a dict) is read every time, so its error still names the field.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from calsync.core.model.calendar import Account

T = TypeVar("T")
#: ``reader(account_id, address, options, credentials)``: what an adapter derives from an account.
Reader = Callable[[str, str, dict[str, Any], dict[str, Any]], T]
_Items = tuple[tuple[str, type, Any], ...]


def _items(values: Mapping[str, Any]) -> _Items:
    return tuple([(key, type(value), value) for key, value in values.items()])


def _key(account: Account) -> tuple[str, str, _Items, _Items] | None:
    """Everything an adapter may derive from the account, as a key; None when a value cannot be one."""
    if not isinstance(account.options, Mapping) or not isinstance(account.credentials, Mapping):
        return None  # not JSON objects: the reader says what is wrong
    key = (account.id, account.address, _items(account.options), _items(account.credentials))
    try:
        hash(key)
    except TypeError:
        return None
    return key


def settings_per_account(reader: Reader[T], *, maxsize: int) -> Callable[[Account], T]:
    """``reader`` applied to an account, its result kept per account identity (thread-safe, bounded)."""

    @functools.lru_cache(maxsize=maxsize)
    def kept(account_id: str, address: str, options: _Items, credentials: _Items) -> T:
        return reader(account_id, address, {k: v for k, _, v in options}, {k: v for k, _, v in credentials})

    def read(account: Account) -> T:
        key = _key(account)
        if key is not None:
            return kept(*key)
        options, credentials = account.options, account.credentials
        return reader(account.id, account.address, dict(options) if isinstance(options, Mapping) else options,
                      dict(credentials) if isinstance(credentials, Mapping) else credentials)  # fmt: skip

    return read

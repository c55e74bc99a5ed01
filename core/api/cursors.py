"""Keyset cursors of the API's pages: the key of a page's last item, opaque to clients.

A page is read after its cursor's key in the key's order, so a row added while a client pages never shifts the
others and a cursor stays good across requests and server processes. A cursor is ``base64url("after:<key>")``, the
key as JSON: a record id (``after:12``), or a list (the target search's ``[updated_at, event, account]``). Anything
else (a forged or damaged one) is 422 naming ``query.cursor``, never a 500 or a silently empty page.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from calsync.core.api.problems import FieldError, invalid

T = TypeVar("T")


def cursor_of(key: Any) -> str:
    """The cursor that resumes after the item whose key is ``key`` (JSON-ready: a record id, a list)."""
    return base64.urlsafe_b64encode(f"after:{json.dumps(key, separators=(',', ':'))}".encode()).decode()


def key_of(cursor: str | None, read: Callable[[Any], T]) -> T | None:
    """The key a cursor resumes after, as ``read`` makes it of the JSON (raising ValueError or TypeError when it does
    not fit); None for the first page. A cursor this API did not answer is 422."""
    if cursor is None:
        return None
    with contextlib.suppress(binascii.Error, UnicodeError, ValueError, TypeError):
        prefix, _, key = base64.urlsafe_b64decode(cursor).decode().partition(":")
        if prefix == "after":
            return read(json.loads(key))
    error = FieldError(field="query.cursor", message="not a cursor from next_cursor")
    raise invalid("the cursor is not one this API returned", [error])


def _record_id(key: Any) -> int:
    if not isinstance(key, int) or isinstance(key, bool) or key < 0:
        raise ValueError("not a record id")
    return key


def after_of(cursor: str | None) -> int | None:
    """The id a cursor resumes after (None: the first page); a cursor this API did not answer is 422."""
    return key_of(cursor, _record_id)


def one_page(found: Sequence[T], limit: int, id_of: Callable[[T], Any]) -> tuple[list[T], str | None]:
    """The first ``limit`` of ``found`` (read with ``limit + 1``) and the cursor after the last, when more exist
    (``id_of`` gives an item's key: its id, or a keyset's JSON-ready list)."""
    items = list(found[:limit])
    return items, cursor_of(id_of(items[-1])) if len(found) > limit else None

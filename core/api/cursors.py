"""Keyset cursors of the API's lists: opaque to clients, ``after:<JSON of the last item's key>`` in base64url.

A list answers ``next_cursor`` when more items follow; the client sends it back as ``cursor``. A cursor names the
last item's key, not a position, so a page stays correct while items are added or change between requests. A cursor
this API did not return is a 422 naming ``query.cursor``.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
from collections.abc import Callable
from typing import Any, TypeVar

from calsync.core.api.problems import FieldError, invalid

T = TypeVar("T")


def cursor_of(key: Any) -> str:
    """The cursor of a page whose last item has ``key`` (JSON-ready)."""
    return base64.urlsafe_b64encode(f"after:{json.dumps(key, separators=(',', ':'))}".encode()).decode()


def key_of(cursor: str | None, read: Callable[[Any], T]) -> T | None:
    """The key a cursor names, as ``read`` makes it of the JSON (raising ValueError or TypeError when it does not fit);
    None for no cursor (the first page)."""
    if cursor is None:
        return None
    with contextlib.suppress(binascii.Error, UnicodeError, ValueError, TypeError):
        prefix, _, key = base64.urlsafe_b64decode(cursor).decode().partition(":")
        if prefix == "after":
            return read(json.loads(key))
    error = FieldError(field="query.cursor", message="not a cursor from next_cursor")
    raise invalid("the cursor is not one this API returned", [error])

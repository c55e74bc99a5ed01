"""Keyset cursors of the API's pages: the id of a page's last item, opaque to clients.

A page is read with ``id > after`` in id order, so a row added while a client pages never shifts the others and a
cursor stays good across requests and server processes. A cursor is ``base64url("after:<id>")``: anything else
(a forged or damaged one) is 422 naming ``query.cursor``, never a 500 or a silently empty page.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
from collections.abc import Callable, Sequence
from typing import TypeVar

from calsync.core.api.problems import FieldError, invalid

T = TypeVar("T")


def cursor_of(record_id: int) -> str:
    """The cursor that resumes after ``record_id``."""
    return base64.urlsafe_b64encode(f"after:{record_id}".encode()).decode()


def after_of(cursor: str | None) -> int | None:
    """The id a cursor resumes after (None: the first page); a cursor this API did not answer is 422."""
    if cursor is None:
        return None
    with contextlib.suppress(binascii.Error, UnicodeError, ValueError):
        prefix, _, record_id = base64.urlsafe_b64decode(cursor).decode().partition(":")
        if prefix == "after" and record_id.isdigit():
            return int(record_id)
    error = FieldError(field="query.cursor", message="not a cursor from next_cursor")
    raise invalid("the cursor is not one this API returned", [error])


def one_page(found: Sequence[T], limit: int, id_of: Callable[[T], int]) -> tuple[list[T], str | None]:
    """The first ``limit`` of ``found`` (read with ``limit + 1``) and the cursor after the last, when more exist."""
    items = list(found[:limit])
    return items, cursor_of(id_of(items[-1])) if len(found) > limit else None

"""What the pages' plain GET filter forms send: an empty field is no filter; an id that is no identifier, or a value
outside the field's choices, is 400 naming the field (a hand-edited address), never a 500 (a NUL the database
refuses) or a silently empty list."""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any, TypeVar

from fastapi import HTTPException

from calsync.core.api.cursors import key_of
from calsync.core.api.problems import ProblemError
from calsync.core.model.errors import InvalidChange
from calsync.core.model.ids import check_identifier

T = TypeVar("T", bound=str)
K = TypeVar("K")


def text(value: str | None) -> str | None:
    """A free-text field: None when left empty."""
    return value.strip() or None if value is not None else None


def free_text(name: str, value: str | None) -> str | None:
    """A free-text filter (an actor's name): None when left empty; a control character (a NUL the database
    refuses) is 400 naming the field."""
    given = text(value)
    if given is not None and not given.isprintable():
        raise HTTPException(400, f"{name} must be printable text")
    return given


def choice(name: str, value: str | None, allowed: Collection[T]) -> T | None:
    """A select field's value among ``allowed``, None when left empty; anything else is 400 naming the field."""
    given = text(value)
    if given is None:
        return None
    for option in allowed:
        if option == given:
            return option
    raise HTTPException(400, f"{name} must be one of {', '.join(allowed)}")


def identifier(name: str, value: str | None) -> str | None:
    """An id field (tenant, account, endpoint): None when left empty; one that is no identifier is 400."""
    given = text(value)
    if given is None:
        return None
    try:
        return check_identifier(given, name)
    except InvalidChange as exc:
        raise HTTPException(400, str(exc)) from None


def resume_key(value: str | None, read: Callable[[Any], K], refused: str) -> K | None:
    """The key a page's cursor resumes after (core.api.cursors; ``read`` makes it of the JSON), None for the first
    page; a cursor the console did not make is 400 saying ``refused``."""
    try:
        return key_of(text(value), read)
    except ProblemError as exc:
        raise HTTPException(400, refused) from exc

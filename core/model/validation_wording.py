"""Pydantic's validation errors in calsync's own words: what is wrong with a field and how to fix it.

Every message a producer or operator sees about a change, a payload or a request body goes through
:func:`field_message`, so none says "Input should be…", "Value error, …" or names a tuple for a JSON array.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from calsync.core.model.ids import IDENTIFIER_RULE

# What a list field holds, named in "must be a list of …".
_ITEMS: dict[str, tuple[str, str]] = {"accounts": ("account id", "account ids"), "attendees": ("attendee", "attendees")}
# What a pattern-checked field must look like, by its name (the last string in its location).
_SHAPES: dict[str, str] = {
    "accounts": IDENTIFIER_RULE,
    "entity_id": IDENTIFIER_RULE,
    "attendees": "an email address",
    "time_zone": "an IANA time zone name such as Europe/Berlin",
}
_TYPES: dict[str, str] = {
    "string_type": "must be a string",
    "bool_type": "must be true or false",
    "int_type": "must be an integer",
    "int_parsing": "must be an integer",
    "float_type": "must be a number",
    "dict_type": "must be a JSON object",
    "model_type": "must be a JSON object",
    "model_attributes_type": "must be a JSON object",
    "missing": "is required",
    "extra_forbidden": "is not a known field",
    "none_required": "must be null",
    "timezone_aware": "needs a UTC offset (e.g. Z)",
    "string_unicode": "must be valid Unicode text: a lone surrogate (such as \\ud800) cannot be stored",
}


def _count(n: Any, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def field_message(err: ErrorDetails) -> str:
    """One error of a pydantic report, in our words (the location is the caller's business)."""
    kind, ctx = err["type"], err.get("ctx") or {}
    name = next((part for part in reversed(err["loc"]) if isinstance(part, str)), "")  # the field, not its index
    one, many = _ITEMS.get(name, ("item", "items"))
    if kind in ("value_error", "assertion_error"):
        return str(err["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
    if kind in _TYPES:
        return _TYPES[kind]
    if kind in ("list_type", "tuple_type", "set_type"):
        return f"must be a list of {many}"
    if kind == "too_short":
        return f"must list at least {_count(ctx.get('min_length'), one, many)}"
    if kind == "too_long":
        return f"must list at most {_count(ctx.get('max_length'), one, many)} (got {ctx.get('actual_length')})"
    if kind == "string_too_short":
        minimum = ctx.get("min_length")
        return "must not be empty" if minimum == 1 else f"must have at least {minimum} characters"
    if kind == "string_too_long":
        return f"must have at most {ctx.get('max_length')} characters"
    if kind == "string_pattern_mismatch":
        shape = _SHAPES.get(name)
        return f"must be {shape}" if shape else f"must match the pattern {ctx.get('pattern')}"
    if kind in ("literal_error", "enum"):
        return f"must be {ctx.get('expected')}"
    return re.sub(r"^(Input|String|Value) should", "must", str(err["msg"]))  # not mapped above: in our phrasing


def describe_validation_error(exc: ValidationError) -> str:
    """``field.path: message; ...``: short enough for a one-line CLI error, precise enough to fix the input."""
    errors = exc.errors()
    parts = []
    for err in errors:
        loc = tuple(err["loc"])
        # A list whose items were refused is reported by its items, not also as "too short".
        if err["type"] == "too_short" and any(tuple(o["loc"])[: len(loc)] == loc and len(o["loc"]) > len(loc)
                                              for o in errors):  # fmt: skip
            continue
        location = ".".join(str(p) for p in loc) or "(root)"
        parts.append(f"{location}: {field_message(err)}")
    return "; ".join(parts)

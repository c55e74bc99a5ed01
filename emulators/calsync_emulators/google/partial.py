"""Partial responses: the ``fields`` parameter of ``events.list`` (Calendar's "Improve performance" guide).

Documented: ``fields`` is a comma-separated list of fields; ``a/b`` selects ``b`` within ``a``; ``a(b,c)``
selects ``b`` and ``c`` within ``a`` (within each element when ``a`` is an array); ``*`` selects every field at
its level; the answer holds only the selected fields and the objects enclosing them; an invalid selection
answers 400. Inferred: a field the response's schema (the discovery document) does not have is invalid, answered
400 ``invalidParameter`` "Invalid field selection <field>" (the wording of reported answers); the other methods
of the emulator ignore ``fields`` (calsync asks for it on listings only).
"""

from __future__ import annotations

import re
from typing import Any

from calsync_emulators.google.errors import ApiError
from calsync_emulators.google.schema import schema

#: Each selected field's own selection; None selects the field whole.
Selection = dict[str, "Selection | None"]

_NAME = re.compile(r"[A-Za-z0-9_@*]+")


def _invalid(text: str) -> ApiError:
    return ApiError(400, "invalidParameter", f"Invalid field selection {text}", location="fields")


def parse(text: str) -> Selection:
    """The selection ``text`` names (400 when it is malformed)."""
    selection, end = _list(text, 0)
    if end != len(text):
        raise _invalid(text)
    return selection


def _list(text: str, at: int) -> tuple[Selection, int]:
    selection: Selection = {}
    while True:
        at = _item(text, at, selection)
        if at < len(text) and text[at] == ",":
            at += 1
            continue
        return selection, at


def _item(text: str, at: int, into: Selection) -> int:
    """One ``a/b/c`` or ``a/b(...)`` merged into ``into``; returns where it ends."""
    names: list[str] = []
    while True:
        found = _NAME.match(text, at)
        if found is None:
            raise _invalid(text)
        names.append(found.group())
        at = found.end()
        if at < len(text) and text[at] == "/":
            at += 1
            continue
        break
    inner: Selection | None = None
    if at < len(text) and text[at] == "(":
        inner, at = _list(text, at + 1)
        if at >= len(text) or text[at] != ")":
            raise _invalid(text)
        at += 1
    for name in reversed(names[1:]):
        inner = {name: inner}
    _merge(into, {names[0]: inner})
    return at


def _merge(into: Selection, more: Selection) -> None:
    """Two selections of one level as one: a field selected whole stays whole."""
    for name, inner in more.items():
        if name not in into:
            into[name] = inner
            continue
        current = into[name]
        if current is None or inner is None:
            into[name] = None
        else:
            _merge(current, inner)


def check(selection: Selection, spec: dict[str, Any]) -> None:
    """Refuse (400) a selected field the schema ``spec`` does not have."""
    if "$ref" in spec:
        check(selection, schema(spec["$ref"]))
        return
    if spec.get("type") == "array":
        check(selection, spec.get("items", {}))
        return
    known: dict[str, Any] = spec.get("properties", {})
    extra = spec.get("additionalProperties")
    for name, inner in selection.items():
        field = known.get(name) or extra or ({} if name == "*" else None)
        if field is None or (inner is not None and field.get("type") not in ("object", "array", None)):
            raise _invalid(name)
        if inner is not None and name != "*":
            check(inner, field)


def select(value: Any, selection: Selection | None) -> Any:
    """``value`` with only the selected fields (of each element of an array)."""
    if selection is None:
        return value
    if isinstance(value, list):
        return [select(item, selection) for item in value]
    if not isinstance(value, dict):
        return value
    chosen: dict[str, Any] = {}
    for key, item in value.items():
        if "*" in selection or key in selection:
            chosen[key] = select(item, selection.get(key, selection.get("*")))
    return chosen


def partial(value: dict[str, Any], fields: str | None, schema_name: str) -> dict[str, Any]:
    """The answer ``value`` (of schema ``schema_name``) reduced to ``fields``; whole when there is none."""
    if fields is None:
        return value
    selection = parse(fields)
    check(selection, schema(schema_name))
    reduced: dict[str, Any] = select(value, selection)
    return reduced

"""Request bodies checked against the discovery document shipped in google-api-python-client's wheel.

The schemas (``Event``, ``Channel``, ...) are read from ``googleapiclient/discovery_cache/documents/calendar.v3.json``
(documented: it is Google's own machine-readable API description). :func:`conform` returns the value with every
field the schema does not know dropped (Google's answers only ever carry schema fields; that it drops rather
than refuses them is inferred) or, in strict mode, refuses the first unknown field with 400. A value of the
wrong JSON type (an integer extended-property value, a string ``sequence``) is refused with 400 ``invalid``
"Invalid value for: <path>" (the refusal is inferred; the message imitates Google's wording for bad values).
``int64`` is a decimal string in JSON, as the discovery document says; an integer is accepted for it too.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
from importlib import resources
from typing import Any

from calsync_emulators.google.errors import ApiError

_DISCOVERY = ("googleapiclient.discovery_cache.documents", "calendar.v3.json")


@functools.cache
def discovery() -> dict[str, Any]:
    """The Calendar v3 discovery document of the installed client library."""
    document: dict[str, Any] = json.loads(resources.files(_DISCOVERY[0]).joinpath(_DISCOVERY[1]).read_text())
    return document


def schema(name: str) -> dict[str, Any]:
    """One named schema of the discovery document (``Event``, ``Channel``, ...)."""
    found: dict[str, Any] = discovery()["schemas"][name]
    return found


def _invalid(path: str) -> ApiError:
    return ApiError(400, "invalid", f"Invalid value for: {path}")


def _scalar(value: Any, spec: dict[str, Any], path: str) -> Any:
    kind, form = spec.get("type"), spec.get("format")
    if kind == "boolean":
        if not isinstance(value, bool):
            raise _invalid(path)
    elif kind == "integer":
        if isinstance(value, bool) or not isinstance(value, int):
            raise _invalid(path)
    elif kind == "number":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _invalid(path)
    elif kind == "string":
        if form == "int64" and isinstance(value, int) and not isinstance(value, bool):
            return str(value)
        if not isinstance(value, str):
            raise _invalid(path)
        _check_format(value, form, path)
    return value


def _check_format(value: str, form: str | None, path: str) -> None:
    try:
        if form == "date":
            dt.date.fromisoformat(value)
        elif form == "date-time":
            dt.datetime.fromisoformat(value)
        elif form == "int64":
            int(value)
    except ValueError as exc:
        raise _invalid(path) from exc


def conform(value: Any, spec: dict[str, Any], path: str, *, strict: bool) -> Any:
    """``value`` as the schema ``spec`` allows it: unknown fields dropped (or refused when strict), types checked."""
    if value is None:
        return None  # PATCH's "remove this field"; the caller decides what null means
    if "$ref" in spec:
        return conform(value, schema(spec["$ref"]), path, strict=strict)
    kind = spec.get("type")
    if kind == "any":
        return value
    if kind == "array":
        if not isinstance(value, list):
            raise _invalid(path)
        return [conform(item, spec.get("items", {}), f"{path}[{n}]", strict=strict) for n, item in enumerate(value)]
    if kind == "object":
        if not isinstance(value, dict):
            raise _invalid(path)
        known: dict[str, Any] = spec.get("properties", {})
        extra = spec.get("additionalProperties")
        result: dict[str, Any] = {}
        for key, item in value.items():
            where = f"{path}.{key}" if path else key
            if key in known:
                result[key] = conform(item, known[key], where, strict=strict)
            elif extra is not None:
                result[key] = conform(item, extra, where, strict=strict)
            elif strict:
                raise ApiError(400, "invalid", f"Unknown field: {where} (strict mode of the emulator)")
        return result
    return _scalar(value, spec, path)

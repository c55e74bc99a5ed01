"""A deterministic YAML writer for the generated files: PyYAML is not a calsync dependency, and these files
only need mappings, lists, strings and numbers, written so that a reviewer can read the PromQL in them."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence

Value = str | int | float | bool | Mapping[str, "Value"] | Sequence["Value"]

_INDENT = "  "
# Unquoted only when no YAML 1.1/1.2 reader can take the text for anything but a string.
_PLAIN = re.compile(r"[A-Za-z][A-Za-z0-9_./-]*|[0-9]+(ms|s|m|h|d|w|y)")
_RESERVED = {"y", "n", "yes", "no", "on", "off", "true", "false", "null", "nan", "inf"}


def dump(data: Mapping[str, Value], header: str = "") -> str:
    """The document for ``data`` with ``header`` as leading comment lines; keys keep their insertion order."""
    comments = "".join(f"# {line}".rstrip() + "\n" for line in header.splitlines())
    return comments + "".join(_mapping(data, 0))


def _scalar(value: str | int | float | bool) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"cannot write {value} as YAML")
        return repr(value)
    if _PLAIN.fullmatch(value) and value.lower() not in _RESERVED:
        return value
    return json.dumps(value, ensure_ascii=False)  # a JSON string is a valid YAML double-quoted scalar


def _is_block(value: str) -> bool:
    """Multi-line text and text full of double quotes (PromQL) read best as a literal block."""
    if "\n" not in value and '"' not in value:
        return False
    lines = value.split("\n")
    return not value[0].isspace() and all(line == line.rstrip() for line in lines) and "\t" not in value


def _block(value: str, depth: int) -> list[str]:
    pad = _INDENT * depth
    return [f"{pad}{line}\n" if line else "\n" for line in value.split("\n")]


def _entry(prefix: str, value: Value, depth: int) -> list[str]:
    """``prefix`` is ``key:`` or ``-``, already indented; nested values go below it one level deeper."""
    if isinstance(value, str) and _is_block(value):
        chomp = "" if value.endswith("\n") else "-"
        return [f"{prefix} |{chomp}\n", *_block(value.removesuffix("\n"), depth + 1)]
    if isinstance(value, Mapping):
        return [f"{prefix} {{}}\n"] if not value else [f"{prefix}\n", *_mapping(value, depth + 1)]
    if isinstance(value, Sequence) and not isinstance(value, str):
        return [f"{prefix} []\n"] if not value else [f"{prefix}\n", *_sequence(value, depth + 1)]
    return [f"{prefix} {_scalar(value)}\n"]


def _mapping(data: Mapping[str, Value], depth: int) -> list[str]:
    pad = _INDENT * depth
    lines: list[str] = []
    for key, value in data.items():
        lines += _entry(f"{pad}{_scalar(key)}:", value, depth)
    return lines


def _sequence(items: Sequence[Value], depth: int) -> list[str]:
    # Items of a list of mappings start on the dash line, the usual Kubernetes and Prometheus layout.
    pad = _INDENT * (depth - 1)
    lines: list[str] = []
    for item in items:
        if isinstance(item, Mapping) and item:
            nested = _mapping(item, depth)
            lines += [f"{pad}- {nested[0].lstrip()}", *nested[1:]]
        else:
            lines += _entry(f"{pad}-", item, depth)
    return lines

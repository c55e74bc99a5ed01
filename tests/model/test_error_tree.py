"""The tree in core/model/errors.py's docstring is the hierarchy: every error class once, under its parent."""

from __future__ import annotations

import importlib
import re

from calsync.core.model import errors
from calsync.core.model.errors import CalsyncError

# Errors of the tree defined next to what raises them, outside the model.
OUTSIDE = ("calsync.core.worker.failures", "calsync.providers.graph.classification")
_BRANCH = re.compile(r"^    ((?:[│ ]   )*)(?:[├└]── )?([A-Z]\w+)")


def _drawn() -> dict[str, str | None]:
    """Class name → its parent's name, as the docstring draws them."""
    parents: dict[str, str | None] = {}
    path: list[str] = []
    for line in (errors.__doc__ or "").splitlines():
        found = _BRANCH.match(line)
        if found is None or (found.group(1) and "──" not in line):
            continue  # prose, or a description continued on the next line
        depth = len(found.group(1)) // 4 + ("──" in line)
        del path[depth:]
        parents[found.group(2)] = path[-1] if path else None
        path.append(found.group(2))
    return parents


def _classes() -> list[type[CalsyncError]]:
    for module in OUTSIDE:
        importlib.import_module(module)
    found: list[type[CalsyncError]] = [CalsyncError]
    for cls in found:
        found += [sub for sub in cls.__subclasses__() if sub not in found]
    return found


def test_every_error_class_is_drawn_under_its_parent() -> None:
    drawn = _drawn()
    classes = {cls.__name__: cls for cls in _classes()}
    assert set(drawn) == set(classes)
    for name, parent in drawn.items():
        bases = [base.__name__ for base in classes[name].__bases__]
        assert (parent is None and name == "CalsyncError") or parent in bases, (name, parent, bases)

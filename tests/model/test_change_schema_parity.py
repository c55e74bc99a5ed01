"""The change model and the published change schema give every shared fixture the same verdict (the model half
of the CLI parity test in tests/cli/test_submit_parity.py, without services)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from calsync.core.model.change import parse_change
from calsync.core.model.errors import InvalidChange
from calsync.core.model.schemas import published

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "changes"
VERDICTS = {"valid": (True, True), "invalid": (False, False), "semantic": (True, False)}  # (schema, model)


def fixtures() -> list[tuple[str, Path]]:
    """Every fixture file with its folder (its expected verdict)."""
    return [(kind, path) for kind in VERDICTS for path in sorted((FIXTURES / kind).glob("*.json"))]


def schema_accepts(document: Any) -> bool:
    """The published change schema's verdict."""
    return bool(jsonschema.Draft202012Validator(published()["change.schema.json"]).is_valid(document))


def test_every_kind_has_fixtures() -> None:
    counts = {kind: sum(1 for k, _ in fixtures() if k == kind) for kind in VERDICTS}
    assert counts["valid"] >= 10 and counts["invalid"] >= 30 and counts["semantic"] >= 3, counts


@pytest.mark.parametrize(("kind", "path"), fixtures(), ids=lambda v: v.stem if isinstance(v, Path) else v)
def test_the_schema_and_the_model_agree(kind: str, path: Path) -> None:
    document = json.loads(path.read_text())
    try:
        parse_change(document)
        model = True
    except InvalidChange:
        model = False
    assert (schema_accepts(document), model) == VERDICTS[kind]

"""The published JSON Schemas (``docs/schemas/``) for producers in other languages.

Regenerate with ``python -m calsync.core.model.schemas docs/schemas``; a test fails when the files drift from the
models.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from calsync.core.model.change import Change
from calsync.core.model.payload import payload_json_schema


def change_json_schema() -> dict[str, Any]:
    """The change file's JSON Schema."""
    schema = Change.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = "https://calsync.dev/schemas/change.schema.json"
    schema["title"] = "calsync change file"
    return schema


def published() -> dict[str, dict[str, Any]]:
    """File name → schema, for everything under docs/schemas/."""
    return {"job-payload.schema.json": payload_json_schema(), "change.schema.json": change_json_schema()}


def render(schema: dict[str, Any]) -> str:
    """Stable text form (sorted keys, trailing newline) so diffs stay readable."""
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def main(target: str) -> None:
    """Write every schema into ``target``."""
    directory = Path(target)
    directory.mkdir(parents=True, exist_ok=True)
    for name, schema in published().items():
        (directory / name).write_text(render(schema))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "docs/schemas")

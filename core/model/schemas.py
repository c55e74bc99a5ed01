"""The published JSON Schemas (``docs/schemas/``) for producers in other languages (docs/PROTOCOL.md).

Regenerate with ``python -m calsync.core.model.schemas docs/schemas``; a test fails when the files drift from the
models, and another runs the same accepted and rejected change files through the change schema and ``calsync
submit`` (tests/fixtures/changes/).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from calsync.core.model.change import Change
from calsync.core.model.intake import IntakeMessage
from calsync.core.model.payload import payload_json_schema
from calsync.core.model.webhooks import WebhookNotification

DIALECT = "https://json-schema.org/draft/2020-12/schema"
BASE_ID = "https://calsync.dev/schemas/"


def _published(model: type[BaseModel], name: str, title: str) -> dict[str, Any]:
    schema = model.model_json_schema()
    schema["$schema"] = DIALECT
    schema["$id"] = BASE_ID + name
    schema["title"] = title
    return schema


def change_json_schema() -> dict[str, Any]:
    """The change file's JSON Schema (``calsync submit --file``, ``POST /v1/changes``, the intake message's change)."""
    return _published(Change, "change.schema.json", "calsync change file")


def intake_json_schema() -> dict[str, Any]:
    """The JSON Schema of the ``submit_change`` message's one positional argument."""
    return _published(IntakeMessage, "intake-message.schema.json", "calsync submit_change message argument")


def webhook_json_schema() -> dict[str, Any]:
    """The JSON Schema of every webhook request's body (docs/PROTOCOL.md, "Webhooks")."""
    return _published(WebhookNotification, "webhook-notification.schema.json", "calsync webhook notification")


def published() -> dict[str, dict[str, Any]]:
    """File name → schema, for everything under docs/schemas/."""
    return {
        "job-payload.schema.json": payload_json_schema(),
        "change.schema.json": change_json_schema(),
        "intake-message.schema.json": intake_json_schema(),
        "webhook-notification.schema.json": webhook_json_schema(),
    }


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

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
from calsync.core.model.payload import JobPayload
from calsync.core.model.webhooks import WebhookNotification

DIALECT = "https://json-schema.org/draft/2020-12/schema"
#: File name → the model it publishes and the schema's title: everything under docs/schemas/.
_PUBLISHED: dict[str, tuple[type[BaseModel], str]] = {
    "job-payload.schema.json": (JobPayload, "calsync sync_calendar_event job payload"),
    "change.schema.json": (Change, "calsync change file"),  # calsync submit --file, POST /v1/changes
    "intake-message.schema.json": (IntakeMessage, "calsync submit_change message argument"),
    "webhook-notification.schema.json": (WebhookNotification, "calsync webhook notification"),
}


def published() -> dict[str, dict[str, Any]]:
    """File name → schema, for everything under docs/schemas/."""
    return {
        name: model.model_json_schema()
        | {"$schema": DIALECT, "$id": f"https://calsync.dev/schemas/{name}", "title": title}
        for name, (model, title) in _PUBLISHED.items()
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

"""docs/openapi.json is the document the application generates (regenerate: calsync serve --print-openapi)."""

from __future__ import annotations

import json
from pathlib import Path

from calsync.core.api.app import openapi_document

COMMITTED = Path(__file__).resolve().parents[2] / "docs" / "openapi.json"


def test_the_committed_openapi_document_is_current() -> None:
    assert COMMITTED.read_text() == openapi_document(), (
        "docs/openapi.json is stale: calsync serve --print-openapi > docs/openapi.json"
    )


def test_it_is_openapi_3_1_with_bearer_auth_and_problem_errors() -> None:
    doc = json.loads(COMMITTED.read_text())
    assert doc["openapi"].startswith("3.1")
    assert doc["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
    post = doc["paths"]["/v1/changes"]["post"]
    assert set(post["responses"]) == {"202", "400", "401", "403", "413", "415", "422", "503"}
    assert "application/problem+json" in post["responses"]["422"]["content"]

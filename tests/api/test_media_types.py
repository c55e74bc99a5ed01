"""Bodies the API cannot read as a change: another media type is 415 naming the accepted one, a number too long to
parse is 400, and every problem type the API answers with is documented in docs/PROTOCOL.md."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, get_args

import httpx
import pytest
from sqlalchemy import func, select

from calsync.core.api.problems import ProblemType
from calsync.core.store import schema
from tests.api.live import LiveApi
from tests.support import Pipeline, change

PROTOCOL = Path(__file__).resolve().parents[2] / "docs" / "PROTOCOL.md"


def _problem(answer: httpx.Response, status: int) -> dict[str, Any]:
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"] == "application/problem+json"
    doc: dict[str, Any] = answer.json()
    assert doc["status"] == status and doc["type"] in documented_types()
    return doc


def _events(pipeline: Pipeline) -> int:
    with pipeline.clients.db.read() as conn:
        return int(conn.execute(select(func.count()).select_from(schema.events)).scalar_one())


def documented_types() -> set[str]:
    """The problem types docs/PROTOCOL.md lists."""
    return set(re.findall(r"urn:calsync:problem:[a-z-]+", PROTOCOL.read_text()))


@pytest.mark.parametrize("media_type", ["text/plain", "application/x-www-form-urlencoded", "application/xml"])
def test_a_json_body_sent_as_another_media_type_is_415_naming_application_json(
    api: LiveApi, pipeline: Pipeline, media_type: str
) -> None:
    body = json.dumps(change([pipeline.account()]))  # a valid change: only its label is wrong
    with api.client(api.key()) as http:
        answer = http.post("/v1/changes", content=body, headers={"Content-Type": media_type})
    doc = _problem(answer, 415)
    assert doc["type"] == "urn:calsync:problem:unsupported-media-type"
    assert "application/json" in doc["detail"] and media_type in doc["detail"]
    assert doc["errors"] == [{"field": "header.Content-Type", "message": "must be application/json"}]
    assert answer.headers["accept"] == "application/json"  # RFC 9110 12.5.1: what a next request may send
    assert _events(pipeline) == 0  # nothing saved


def test_json_with_parameters_or_a_json_suffix_is_accepted(api: LiveApi, pipeline: Pipeline) -> None:
    account = pipeline.account()
    with api.client(api.key()) as http:
        for media_type in ("application/json; charset=utf-8", "application/merge-patch+json"):
            body = json.dumps(change([account], title=media_type))
            answer = http.post("/v1/changes", content=body, headers={"Content-Type": media_type})
            assert answer.status_code == 202, answer.text


def test_the_other_json_routes_answer_415_too(api: LiveApi) -> None:
    with api.client(api.key(scope="admin")) as http:
        answer = http.post("/v1/dead-letters/replay", content='{"ids": [1]}', headers={"Content-Type": "text/plain"})
    assert _problem(answer, 415)["errors"][0]["field"] == "header.Content-Type"


def test_an_unauthenticated_request_is_401_whatever_its_media_type(api: LiveApi) -> None:
    with api.client() as anonymous:
        _problem(anonymous.post("/v1/changes", content="{}", headers={"Content-Type": "text/plain"}), 401)


def test_a_number_too_long_to_parse_is_a_documented_400(api: LiveApi, pipeline: Pipeline) -> None:
    body = json.dumps(change([pipeline.account()])).replace('"upsert"', '"upsert", "n": ' + "7" * 5000)
    with api.client(api.key()) as http:
        answer = http.post("/v1/changes", content=body, headers={"Content-Type": "application/json"})
    doc = _problem(answer, 400)
    assert doc["type"] == "urn:calsync:problem:malformed" and "digits" in doc["detail"], doc
    assert "sys.set_int_max_str_digits" not in doc["detail"]


def test_every_problem_type_the_api_answers_with_is_documented() -> None:
    answered = {f"urn:calsync:problem:{slug}" for slug in get_args(ProblemType)}
    assert answered - documented_types() == set()

"""docs/PROTOCOL.md is true: its redis-cli sequence and its RabbitMQ snippet, run exactly as written against the
real broker with a running worker, get the change accepted; its JSON examples are what the schemas accept."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from calsync.core.messaging.messages import intake_message
from calsync.core.model.intake import INTAKE_JOB, IntakeMessage
from calsync.core.model.schemas import published
from tests.conftest import RABBITMQ_URL
from tests.integration.intake_support import intake_pipeline, wait_synced
from tests.support import Pipeline, wait_until

__all__ = ["intake_pipeline"]

PROTOCOL = Path(__file__).resolve().parents[2] / "docs" / "PROTOCOL.md"


def documented_block(marker: str, language: str) -> str:
    """The fenced block right after the ``<!-- {marker} example ... -->`` comment."""
    found = re.search(rf"<!-- {re.escape(marker)} example[^>]*-->\n```{language}\n(.*?)\n```", PROTOCOL.read_text(),
                      re.DOTALL)  # fmt: skip
    assert found is not None, f"docs/PROTOCOL.md has no {marker} example"
    return found.group(1)


def json_examples() -> list[Any]:
    """Every ```json block of the document, parsed."""
    return [json.loads(block) for block in re.findall(r"```json\n(.*?)\n```", PROTOCOL.read_text(), re.DOTALL)]


@pytest.mark.integration
@pytest.mark.both_brokers
def test_the_documented_sequence_gets_a_change_accepted(intake_pipeline: Pipeline, broker_kind: str) -> None:
    pipeline = intake_pipeline
    settings = pipeline.settings
    pipeline.account(account_id="acc_1")
    env = {**os.environ, "NS": settings.redis_namespace, "QUEUE": settings.intake_queue, "TENANT": "tenant-1",
           "ACCOUNT": "acc_1", "ENTITY": "evt_from_doc"}  # fmt: skip
    with pipeline.worker(threads=2):
        if broker_kind == "redis":
            env["REDIS_URL"] = str(settings.broker_url)
            done = subprocess.run(["sh", "-c", documented_block("redis-cli", "sh")], env=env, capture_output=True,
                                  text=True, timeout=30)  # fmt: skip
            assert done.returncode == 0, done.stderr
            assert done.stdout.split() == ["1", "1"]  # HSET and RPUSH: one field, one id
        else:
            env["AMQP_URL"] = RABBITMQ_URL
            done = subprocess.run([sys.executable, "-c", documented_block("rabbitmq", "python")], env=env,
                                  capture_output=True, text=True, timeout=30)  # fmt: skip
            assert done.returncode == 0, done.stderr
        row = wait_synced(pipeline, "evt_from_doc", "acc_1")
        if broker_kind == "redis":  # acked: without the right redis_message_id the body would stay in the hash
            keys = pipeline.clients.keys
            bodies = keys.queue_messages(settings.intake_queue)
            wait_until(lambda: pipeline.clients.redis.hlen(bodies) == 0, what="the message to be acked")
    assert row.synced_version == 1
    assert pipeline.dead_letters(job_type=INTAKE_JOB) == []
    [stored] = pipeline.provider.events("acc_1")
    assert stored.body["title"] == "Planning"


def test_the_documented_envelope_is_dramatiqs_and_its_examples_match_the_schemas() -> None:
    envelope, payload, *_http = json_examples()  # the broker sections come first; then the HTTP problem example
    schemas = published()
    jsonschema.Draft202012Validator(schemas["intake-message.schema.json"]).validate(envelope["args"][0])
    jsonschema.Draft202012Validator(schemas["job-payload.schema.json"]).validate(payload)
    built = json.loads(intake_message("intake", IntakeMessage.model_validate(envelope["args"][0])).encode())
    assert set(built) == set(envelope)
    assert (built["queue_name"], built["actor_name"], built["kwargs"]) == ("intake", INTAKE_JOB, {})
    assert isinstance(built["message_timestamp"], int) and built["message_timestamp"] > 10**12  # milliseconds


def test_the_http_section_documents_every_route_of_the_openapi_document() -> None:
    section = PROTOCOL.read_text().split("\n## HTTP (`calsync serve`)\n", 1)[1].split("\n## ", 1)[0]
    openapi = json.loads((PROTOCOL.parent / "openapi.json").read_text())
    for path in openapi["paths"]:
        assert path.split("{")[0] in section, f"{path} is not documented in PROTOCOL.md's HTTP section"

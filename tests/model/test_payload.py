"""The job payload: the seed's fields plus account and version, keys per logical effect, published schemas."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import jsonschema
import pytest

from calsync.core.model.errors import InvalidPayload
from calsync.core.model.payload import JobPayload, idempotency_key, new_payload, parse_payload
from calsync.core.model.schemas import published, render

DOCS = Path(__file__).resolve().parents[2] / "docs" / "schemas"


def test_the_payload_has_exactly_the_seed_fields_plus_account_and_version() -> None:
    seed = {"job_id", "job_type", "tenant_id", "entity_id", "operation", "idempotency_key", "attempt", "scheduled_at",
            "trace_id"}  # fmt: skip
    assert set(JobPayload.model_fields) == seed | {"account_id", "target_version"}


def test_idempotency_keys_name_one_logical_effect_per_target() -> None:
    assert idempotency_key("t", "e", "a", "create", 4) == "calendar:t:e:a:create"
    assert idempotency_key("t", "e", "a", "update", 17) == "calendar:t:e:a:update:v17"
    assert idempotency_key("t", "e", "a", "delete", 18) == "calendar:t:e:a:delete:v18"


def test_the_next_attempt_keeps_identity_and_moves_schedule() -> None:
    payload = new_payload(tenant_id="t", entity_id="e", account_id="a", operation="update", version=3, trace_id="r")
    later = payload.next_attempt(30)
    assert (later.job_id, later.idempotency_key, later.attempt) == (payload.job_id, payload.idempotency_key, 2)
    assert later.scheduled_at - payload.scheduled_at >= dt.timedelta(seconds=29)


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        ([], "exactly one positional argument"),
        (["text"], "exactly one positional argument"),
        ([{"job_id": "j"}], "tenant_id: is required"),
        ([{**new_payload(tenant_id="t", entity_id="e", account_id="a", operation="create", version=1,
                         trace_id="r").to_message_arg(), "schema": 2}], "schema: is not a known field"),
        ([{**new_payload(tenant_id="t", entity_id="e", account_id="a", operation="create", version=1,
                         trace_id="r").to_message_arg(), "idempotency_key": "calendar:x:y:z:create"}],
         "idempotency_key must start with 'calendar:t:e:a:'"),
    ],
)  # fmt: skip
def test_corrupt_payloads_are_rejected_with_the_reason(args: list[object], complaint: str) -> None:
    with pytest.raises(InvalidPayload) as caught:
        parse_payload(args)
    assert complaint in str(caught.value)


@pytest.mark.parametrize("name", sorted(published()))
def test_published_schemas_are_current(name: str) -> None:
    hint = "run: python -m calsync.core.model.schemas docs/schemas"
    assert (DOCS / name).read_text() == render(published()[name]), hint


def test_the_published_payload_schema_accepts_the_seed_example() -> None:
    schema = json.loads((DOCS / "job-payload.schema.json").read_text())
    example = {
        "job_id": "job_01HXYZ",
        "job_type": "sync_calendar_event",
        "tenant_id": "tenant_123",
        "entity_id": "event_456",
        "account_id": "acc_1",
        "operation": "update",
        "target_version": 17,
        "idempotency_key": "calendar:tenant_123:event_456:acc_1:update:v17",
        "attempt": 1,
        "scheduled_at": "2026-08-23T10:00:00Z",
        "trace_id": "req_abcd1234",
    }
    jsonschema.validate(example, schema)
    assert parse_payload([example]).target_version == 17
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**example, "attempt": 0}, schema)

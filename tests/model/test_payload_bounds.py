"""Payload numbers fit the storage (PostgreSQL ``integer``), and a rejected payload still names its ids."""

from __future__ import annotations

from typing import Any

import pytest

from calsync.core.model.errors import InvalidPayload
from calsync.core.model.payload import STORED_INT_MAX, new_payload, parse_payload, raw_ids


def _payload(**over: Any) -> dict[str, Any]:
    doc = new_payload(tenant_id="t1", entity_id="e1", account_id="a1", operation="update", version=2,
                      trace_id="tr-1").to_message_arg()  # fmt: skip
    doc.update(over)
    return doc


@pytest.mark.parametrize(
    ("field", "value"),
    [("target_version", STORED_INT_MAX + 1), ("target_version", 0), ("target_version", -1),
     ("target_version", 1.5), ("target_version", "3"), ("target_version", 2.0), ("target_version", True),
     ("attempt", STORED_INT_MAX + 1), ("attempt", 0), ("attempt", "2")],
)  # fmt: skip
def test_numbers_outside_the_stored_range_or_not_integers_are_invalid(field: str, value: Any) -> None:
    with pytest.raises(InvalidPayload, match=field) as caught:
        parse_payload([_payload(**{field: value})])
    assert caught.value.ids["trace_id"] == "tr-1" and caught.value.ids["tenant_id"] == "t1"


def test_the_largest_stored_numbers_are_valid() -> None:
    key = f"calendar:t1:e1:a1:update:v{STORED_INT_MAX}"
    parsed = parse_payload([_payload(target_version=STORED_INT_MAX, attempt=STORED_INT_MAX, idempotency_key=key)])
    assert parsed.target_version == parsed.attempt == STORED_INT_MAX


def test_raw_ids_are_read_best_effort_and_bounded() -> None:
    assert raw_ids([{"job_id": "j" * 500, "tenant_id": 7, "entity_id": ["x"], "trace_id": "", "account_id": True}]) == {
        "job_id": "j" * 128, "tenant_id": "7"}  # fmt: skip
    assert raw_ids("not a payload") == {} and raw_ids([1, 2]) == {}
    with pytest.raises(InvalidPayload) as caught:
        parse_payload([{"job_id": "job-1", "trace_id": "tr-9"}, {}])
    assert caught.value.ids == {}  # two arguments: not one payload, so no ids are guessed

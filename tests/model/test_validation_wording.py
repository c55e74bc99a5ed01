"""Every refused change is explained in calsync's words: no pydantic phrasing, lists are lists of account ids."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from calsync.core.model.change import parse_change
from calsync.core.model.errors import InvalidChange

FIXTURES = Path(__file__).parents[1] / "fixtures" / "changes"
PYDANTIC = ("Input should", "Value error", "String should", "Tuple should", "tuple", "Field required",
            "Extra inputs", "valid dictionary", "instance of Change", "after validation")  # fmt: skip


@pytest.mark.parametrize("path", sorted([*FIXTURES.glob("invalid/*.json"), *FIXTURES.glob("semantic/*.json")]),
                         ids=lambda p: p.stem)  # fmt: skip
def test_no_refusal_speaks_pydantic(path: Path) -> None:
    with pytest.raises(InvalidChange) as refused:
        parse_change(json.loads(path.read_text()))
    assert not [phrase for phrase in PYDANTIC if phrase in str(refused.value)], str(refused.value)


@pytest.mark.parametrize(
    ("fixture", "message"),
    [
        ("accounts_as_a_string", "accounts: must be a list of account ids"),
        ("no_accounts_listed", "accounts: must list at least 1 account id"),
        ("too_many_accounts", "accounts: must list at most 100 account ids (got 101)"),
        ("account_id_with_a_space", "accounts.0: must be an id of letters, digits and _ . @ - "
                                    "(at most 128, starting with a letter or digit)"),
        ("change_is_an_array", "(root): must be a JSON object"),
        ("missing_operation", "operation: is required"),
        ("extra_top_level_field", "priority: is not a known field"),
        ("all_day_as_string", "event.all_day: must be true or false; event.start: not a valid ISO 8601 date-time"),
        ("start_as_unix_time", "event.start: must be a string: an ISO 8601 date-time, or a date for all-day events"),
    ],
)  # fmt: skip
def test_a_refusal_says_how_to_fix_the_field(fixture: str, message: str) -> None:
    with pytest.raises(InvalidChange) as refused:
        parse_change(json.loads((FIXTURES / "invalid" / f"{fixture}.json").read_text()))
    assert str(refused.value).startswith(message)

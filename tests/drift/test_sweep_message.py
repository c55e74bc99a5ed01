"""A sweep message's argument comes off the broker (outside input): it is a sweep or an InvalidPayload, nothing
else, and a message the scheduler built reads back as it was built."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from calsync.core.drift.sweep import parse_sweep, sweep_message
from calsync.core.model.errors import InvalidPayload

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner, max_size=3),
    max_leaves=8,
)


@given(st.one_of(json_values, st.fixed_dictionaries({"account_id": json_values}, optional={"claim": json_values}),
                 st.fixed_dictionaries({"account_id": st.text()}, optional={"claim": st.text()})))  # fmt: skip
def test_any_argument_is_a_sweep_or_an_invalid_payload(arg: Any) -> None:
    try:
        account_id, claim = parse_sweep(arg)
    except InvalidPayload:
        return
    assert isinstance(account_id, str)
    assert claim is None or claim.tzinfo is not None


@given(st.text(min_size=1, max_size=40), st.datetimes(timezones=st.just(dt.UTC)) | st.none())
def test_a_built_message_reads_back_as_built(account_id: str, claim: dt.datetime | None) -> None:
    [arg] = sweep_message("calendar-drift", account_id, claim).args
    assert parse_sweep(arg) == (account_id, claim)


@pytest.mark.parametrize("claim", ["2026-12-07T17:00:00", "yesterday", 17, ""])
def test_a_claim_without_its_offset_or_not_a_time_is_refused(claim: object) -> None:
    with pytest.raises(InvalidPayload):
        parse_sweep({"account_id": "acc", "claim": claim})

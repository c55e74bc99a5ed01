"""``calsync submit`` refuses a bad change in one line of calsync's words, naming every unknown account."""

from __future__ import annotations

import json
from typing import Any

import pytest

from calsync.core.config.settings import Settings
from calsync.core.store.crypto import generate_key
from tests.cli.process import calsync, json_out, one_line_error

EVENT = {"title": "x", "start": "2026-12-03T15:00", "end": "2026-12-03T16:00"}


@pytest.fixture
def settings(settings_factory: Any) -> Settings:
    built: Settings = settings_factory(secret_key=generate_key())
    json_out(calsync("migrate", settings=built))
    return built


@pytest.mark.parametrize(
    ("accounts", "complaint"),
    [
        ("acc_a", "accounts: must be a list of account ids"),
        (["acc_a", "acc_b"], "accounts: accounts acc_a, acc_b do not exist for tenant t1"),
    ],
    ids=["a string", "two unknown"],
)
def test_a_bad_account_list_is_one_line_in_our_words(settings: Settings, accounts: Any, complaint: str) -> None:
    change = json.dumps({"operation": "upsert", "accounts": accounts, "event": EVENT})
    line = one_line_error(calsync("submit", "--tenant", "t1", "--file", "-", settings=settings, stdin=change), 2)
    assert line.endswith(complaint) and "Input should" not in line and "tuple" not in line

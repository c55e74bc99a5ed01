"""An account's ``max_concurrency`` option (traffic control's per-account limit) is checked at ``accounts add``."""

from __future__ import annotations

from typing import Any

import pytest

from calsync.core.model.calendar import Account
from calsync.core.model.errors import ConfigurationError
from calsync.core.traffic import Limits
from calsync.core.traffic.gate import account_concurrency
from calsync.providers.registry import validate_account


def _account(**options: Any) -> Account:
    return Account(id="acc", tenant_id="t", provider="memory", address="a@example.com", options=options)


@pytest.mark.parametrize("value", [0, -1, "4", True, 2.5])
def test_a_bad_max_concurrency_is_refused_with_the_option_named(value: Any) -> None:
    with pytest.raises(ConfigurationError, match="max_concurrency"):
        validate_account(_account(max_concurrency=value))


def test_a_valid_max_concurrency_overrides_the_providers_limit() -> None:
    validate_account(_account(max_concurrency=1))
    assert account_concurrency(_account(max_concurrency=1), Limits(concurrency=4)) == 1
    assert account_concurrency(_account(), Limits(concurrency=4)) == 4

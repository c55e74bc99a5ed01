"""A Graph account's validated login: the same while its fields stay, anew on a change, errors naming the account."""

from __future__ import annotations

from typing import Any

import pytest

from calsync.core.model.calendar import Account
from calsync.core.model.errors import ConfigurationError
from calsync.providers.graph.credentials import read_graph_account
from tests.support import in_threads

APP = {"type": "client_credentials", "tenant_id": "t", "client_id": "c", "client_secret": "secret-1"}


def account(credentials: dict[str, Any] | None = None, options: dict[str, Any] | None = None,
            address: str = "alpha@example.com", account_id: str = "acc-1") -> Account:  # fmt: skip
    """A Graph account with fresh dicts, as each job's decrypted credentials are."""
    return Account(account_id, "tenant-1", "graph", address, credentials=dict(credentials or APP),
                   options=dict(options or {}))  # fmt: skip


def test_the_same_fields_read_the_same_in_every_thread() -> None:
    first = read_graph_account(account())
    seen: list[object] = []
    in_threads(lambda _: seen.append(read_graph_account(account())), 4, timeout=30)
    assert seen == [first] * 4


@pytest.mark.parametrize(
    "changed",
    [
        {"credentials": {**APP, "client_secret": "secret-2"}},  # a new secret
        {"options": {"calendar": "cal-2"}},
        {"address": "beta@example.com"},
        {"account_id": "acc-2"},
        {"options": {"max_concurrency": 2}},
    ],
)
def test_a_changed_field_is_validated_anew(changed: dict[str, Any]) -> None:
    kept = read_graph_account(account())
    fresh = read_graph_account(account(**changed))
    assert fresh is not kept
    assert fresh.fingerprint != kept.fingerprint or "account_id" in changed
    if "credentials" in changed:
        assert fresh.secrets == ("secret-2",) and fresh.credential() == "secret-2"
    assert fresh.calendar == changed.get("options", {}).get("calendar")


def test_errors_are_never_kept_and_name_their_account() -> None:
    wrong = {**APP, "extra": 1}
    for account_id in ("acc-1", "acc-2"):
        with pytest.raises(ConfigurationError, match=rf"Graph account {account_id}: credentials\.extra"):
            read_graph_account(account(wrong, account_id=account_id))
    with pytest.raises(ConfigurationError, match=r"options\.calendar"):  # a list, not an id
        read_graph_account(account(options={"calendar": ["not", "an", "id"]}))
    assert read_graph_account(account(options={"max_concurrency": 1})).credential() == "secret-1"
    with pytest.raises(ConfigurationError, match=r"options\.max_concurrency"):  # equal to 1, not an integer
        read_graph_account(account(options={"max_concurrency": True}))

"""An account's registration: the identifier rule submit uses, the address per provider, the calendar it writes into."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from calsync.core.model.account_rules import calendar_key, check_address, is_smtp_address
from calsync.core.model.calendar import ProviderName
from calsync.core.model.change import parse_change
from calsync.core.model.errors import ConfigurationError, InvalidChange
from calsync.core.model.ids import check_identifier

_EVENT = {"title": "x", "start": "2026-12-01T09:00", "end": "2026-12-01T10:00"}


@pytest.mark.parametrize("tenant", ["", " acme ", "acme ", "a" * 5000, "a:b", "-acme", "ac me", "acme\x00"])
def test_a_tenant_submit_refuses_is_refused_with_the_rule_and_a_long_one_is_not_echoed(tenant: str) -> None:
    with pytest.raises(InvalidChange, match=r"^--tenant: .* is not a valid identifier; it must be an id of") as raised:
        check_identifier(tenant, "--tenant")
    assert len(str(raised.value)) < 300


@given(st.one_of(st.text(max_size=140), st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,130}", fullmatch=True)))
def test_an_id_is_accepted_by_the_cli_exactly_when_a_change_accepts_it(value: str) -> None:
    try:
        parse_change({"operation": "upsert", "accounts": [value], "event": _EVENT})
    except InvalidChange:
        in_a_change = False
    else:
        in_a_change = True
    try:
        check_identifier(value, "--id")
    except InvalidChange:
        at_the_cli = False
    else:
        at_the_cli = True
    assert at_the_cli == in_a_change


@pytest.mark.parametrize(
    ("provider", "address", "accepted"),
    [
        ("google", "not an email", False),
        ("google", "primary", True),
        ("google", "alice@example.com", True),
        ("google", "c_1a2b3c@group.calendar.google.com", True),
        ("google", "en.usa#holiday@group.v.calendar.google.com", True),
        ("google", "room-1@resource.calendar.google.com", True),
        ("google", "Primary", False),
        ("google", "", False),
        ("exchange", "primary", False),
        ("exchange", "alice@example", False),
        ("exchange", " alice@example.com", False),
        ("exchange", "a@b@example.com", False),
        ("exchange", "alice@example.com", True),
        ("graph", "not an email", False),
        ("graph", "alice@example.com", True),
        ("memory", "team calendar", False),
        ("memory", "team@example.com", True),
        ("exchange", "a" * 320 + "@example.com", False),
    ],
)
def test_the_address_follows_its_provider_s_rule(provider: ProviderName, address: str, accepted: bool) -> None:
    if accepted:
        check_address("acc", provider, address)
        return
    with pytest.raises(ConfigurationError, match=r"^account acc: address .* is not "):
        check_address("acc", provider, address)


def test_ews_and_graph_accounts_of_one_mailbox_write_into_one_calendar() -> None:
    ews = calendar_key("exchange", "Alice@Example.com", {"server_url": "https://mail.example.com/EWS/Exchange.asmx"})
    graph = calendar_key("graph", "alice@example.com", {})
    assert ews == graph == "exchange:alice@example.com"
    assert calendar_key("graph", "alice@example.com", {"calendar": "AAMkAD="}) == "exchange:alice@example.com/AAMkAD="
    assert calendar_key("graph", "bob@example.com", {}) != ews


def test_a_google_calendar_is_its_id_and_primary_names_no_calendar_by_itself() -> None:
    assert calendar_key("google", "Alice@Example.com", {}) == "google:alice@example.com"
    assert calendar_key("google", "alice@example.com", {"calendar_id": "team@group.calendar.google.com"}) == (
        "google:team@group.calendar.google.com"
    )
    assert calendar_key("google", "primary", {}) is None
    assert calendar_key("google", "alice@example.com", {"calendar_id": "primary"}) is None
    assert calendar_key("google", "alice@example.com", {}) != calendar_key("exchange", "alice@example.com", {})


def test_a_memory_account_is_its_own_calendar() -> None:
    assert calendar_key("memory", "team@example.com", {}) is None


@given(st.text(max_size=400))
def test_an_accepted_mailbox_fits_its_column_and_both_adapters_name_its_calendar_alike(address: str) -> None:
    if not is_smtp_address(address):
        return
    assert len(address) <= 320 and address.count("@") == 1 and not any(c.isspace() for c in address)
    assert calendar_key("graph", address, {}) == calendar_key("exchange", address, {}) == f"exchange:{address.lower()}"

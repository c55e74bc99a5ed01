"""``accounts add`` refuses, for every provider, an option it does not know (naming it and the allowed ones) and an
address it cannot have, before any adapter call."""

from __future__ import annotations

from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from calsync.core.model.calendar import Account, ProviderName
from calsync.core.model.errors import ConfigurationError
from calsync.providers.registry import option_names, validate_account

_VALID: dict[ProviderName, tuple[dict[str, Any], dict[str, Any]]] = {
    "memory": ({}, {}),
    "google": ({"refresh_token": "r", "client_id": "c", "client_secret": "s"}, {}),
    "exchange": ({"username": "u", "password": "p"},
                 {"auth_type": "basic", "server_url": "https://mail.example.com/EWS/Exchange.asmx"}),
    "graph": ({"type": "client_credentials", "tenant_id": "t", "client_id": "c", "client_secret": "s"}, {}),
}  # fmt: skip


def _service_account_key() -> dict[str, str]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    return {"type": "service_account", "client_email": "robot@project.iam.gserviceaccount.com",
            "private_key": pem.decode(), "token_uri": "https://oauth2.googleapis.com/token"}  # fmt: skip


def _account(provider: ProviderName, address: str = "alpha@example.com", **options: Any) -> Account:
    credentials, required = _VALID[provider]
    return Account("acc_x", "t", provider, address, credentials=credentials, options={**required, **options})


@pytest.mark.parametrize("provider", list(_VALID))
def test_every_provider_takes_its_own_options_and_max_concurrency(provider: ProviderName) -> None:
    validate_account(_account(provider, max_concurrency=2))
    assert "max_concurrency" in option_names(provider)


@pytest.mark.parametrize("provider", list(_VALID))
def test_an_unknown_option_is_refused_naming_it_and_the_allowed_ones(provider: ProviderName) -> None:
    with pytest.raises(ConfigurationError) as raised:
        validate_account(_account(provider, colour="blue", max_concurency=3))
    allowed = ", ".join(sorted(option_names(provider)))
    assert str(raised.value) == (
        f"account acc_x: unknown options 'colour', 'max_concurency' for provider {provider} (allowed: {allowed})"
    )


@pytest.mark.parametrize(
    ("provider", "address"),
    [("google", "not an email"), ("exchange", "not an email"), ("graph", "alice@localhost"), ("memory", "")],
)
def test_an_address_the_provider_cannot_have_is_refused(provider: ProviderName, address: str) -> None:
    with pytest.raises(ConfigurationError, match=r"^account acc_x: address .* is not "):
        validate_account(_account(provider, address))


def test_google_takes_a_calendar_id_as_address_or_option_but_nothing_else() -> None:
    validate_account(_account("google", "primary"))
    validate_account(_account("google", "c_123@group.calendar.google.com"))
    validate_account(_account("google", calendar_id="team@group.calendar.google.com"))
    with pytest.raises(ConfigurationError, match="option calendar_id 'team calendar' is not a calendar id"):
        validate_account(_account("google", calendar_id="team calendar"))
    with pytest.raises(ConfigurationError, match="option subject 'alice' is not a user's email address"):
        validate_account(_account("google", subject="alice"))


@pytest.mark.parametrize("address", ["primary", "c_123@group.calendar.google.com"])
def test_a_service_account_needs_a_user_to_impersonate(address: str) -> None:
    key = _service_account_key()
    with pytest.raises(ConfigurationError, match=r"add --option subject=USER \(or --option delegate=false\)"):
        validate_account(Account("acc_x", "t", "google", address, credentials=key))
    validate_account(Account("acc_x", "t", "google", address, credentials=key, options={"subject": "a@example.com"}))
    validate_account(Account("acc_x", "t", "google", address, credentials=key, options={"delegate": False}))

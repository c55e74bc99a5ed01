"""GoogleProvider's credentials against the emulator: token refresh and reuse, service accounts with
domain-wide delegation, bad credentials as configuration errors, and no secret in any error message."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from calsync.core.model.calendar import Account
from calsync.core.model.errors import AuthRevoked, ConfigurationError, InvalidRequest
from calsync.core.model.redaction import redact
from calsync.providers.google.credentials import SCOPES
from calsync.providers.google.provider import GoogleProvider
from tests.providers.google.gcal_support import CAL, Api, Emulator, make_event, only_event, target_for


def service_account_info(emulator: Emulator) -> dict[str, str]:
    """A service-account key file whose token endpoint is the emulator, with a key made for this test."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    return {
        "type": "service_account",
        "project_id": "calsync-test",
        "private_key_id": "0123456789abcdef",
        "private_key": pem.decode(),
        "client_email": "robot@calsync-test.iam.gserviceaccount.com",
        "client_id": "1234567890",
        "token_uri": emulator.token_uri,
    }


def service_account(emulator: Emulator, **fields: Any) -> Account:
    """A Google account signing in with a service-account key (domain-wide delegation to ``CAL``)."""
    values: dict[str, Any] = {"id": "acct-sa", "tenant_id": "tenant-1", "provider": "google", "address": CAL,
                              "credentials": service_account_info(emulator), **fields}  # fmt: skip
    return Account(**values)


def test_token_refresh_after_server_side_expiry(
    provider: GoogleProvider, account: Account, emulator: Emulator, api: Api
) -> None:
    event = make_event()
    created = provider.upsert(account, event, target_for(event, account))
    emulator.control("POST", "tokens/expire")
    synced = target_for(event, account, external_id=created.external_id, etag=created.etag)
    provider.upsert(account, dataclasses.replace(event, version=2, title="After refresh"), synced)
    assert only_event(api)["summary"] == "After refresh"
    assert emulator.calls() == [
        ("POST", "token", 200),
        ("POST", "events", 200),
        ("PUT", created.external_id, 401),
        ("POST", "token", 200),
        ("PUT", created.external_id, 200),
        ("POST", "token", 200),  # the inspecting client's own grant
        ("GET", "events", 200),
    ]


def test_access_token_is_reused_across_calls(provider: GoogleProvider, account: Account, emulator: Emulator) -> None:
    for n in range(3):
        event = make_event(f"ev-{n}")
        provider.upsert(account, event, target_for(event, account))
    assert [c[1] for c in emulator.calls()].count("token") == 1


def test_short_token_lifetime_refreshes_before_each_call(
    provider: GoogleProvider, account: Account, emulator: Emulator
) -> None:
    # google-auth refreshes when fewer than 3m45s remain, so a 60 s token is renewed before every call.
    emulator.control("POST", "config", {"token_lifetime": 60})
    for n in range(2):
        event = make_event(f"ev-{n}")
        provider.upsert(account, event, target_for(event, account))
    assert [c[1] for c in emulator.calls()] == ["token", "events", "token", "events"]


def test_service_account_with_domain_wide_delegation(provider: GoogleProvider, emulator: Emulator, api: Api) -> None:
    robot = service_account(emulator)
    event = make_event()
    ref = provider.upsert(robot, event, target_for(event, robot))
    assert only_event(api)["id"] == ref.external_id
    grant = emulator.requests()[0]
    assert (grant["path"], grant["grant"], grant["subject"], grant["scope"]) == ("/token", "jwt-bearer", CAL, SCOPES[0])

    as_itself = dataclasses.replace(robot, id="acct-sa-2", options={"delegate": False, "calendar_id": "c@example.com"})
    provider.upsert(as_itself, event, target_for(event, as_itself))
    assert [r["subject"] for r in emulator.requests() if r["path"] == "/token"][-1] is None

    other_subject = dataclasses.replace(robot, id="acct-sa-3", options={"subject": "admin@example.com"})
    provider.upsert(other_subject, event, target_for(event, other_subject))
    assert [r["subject"] for r in emulator.requests() if r["path"] == "/token"][-1] == "admin@example.com"


@pytest.mark.parametrize(
    ("credentials", "options", "match"),
    [
        ({}, {}, "authorized_user or service_account"),
        ({"type": "external_account"}, {}, "authorized_user or service_account"),
        ({"type": "authorized_user", "client_id": "c", "refresh_token": "1//secret-rt"}, {}, "lack client_secret"),
        ({"client_id": "c", "client_secret": "s3cr3t-value", "refresh_token": ""}, {}, "lack refresh_token"),
        (
            {"type": "service_account", "client_email": "r@x", "token_uri": "http://t", "private_key": "-----BEGIN"},
            {},
            "malformed",
        ),
        ({"type": "service_account", "client_email": "r@x", "private_key": "k"}, {}, "lack token_uri"),
        ({"refresh_token": "1//rt", "client_id": "c", "client_secret": "s"}, {"calendar_id": 7}, "calendar_id"),
    ],
)
def test_bad_credentials_are_configuration_errors(
    provider: GoogleProvider, credentials: dict[str, Any], options: dict[str, Any], match: str
) -> None:
    broken = Account(
        id="acct-bad", tenant_id="t", provider="google", address=CAL, credentials=credentials, options=options
    )
    event = make_event()
    with pytest.raises(ConfigurationError, match=match) as caught:
        provider.upsert(broken, event, target_for(event, broken))
    for secret in ("1//secret-rt", "s3cr3t-value", "-----BEGIN"):
        assert secret not in str(caught.value)


def test_service_account_with_bad_delegate_option(provider: GoogleProvider, emulator: Emulator) -> None:
    robot = service_account(emulator, options={"delegate": "yes"})
    event = make_event()
    with pytest.raises(ConfigurationError, match="delegate"):
        provider.upsert(robot, event, target_for(event, robot))


def test_error_messages_never_carry_secrets(provider: GoogleProvider, account: Account, emulator: Emulator) -> None:
    refresh_token = account.credentials["refresh_token"]
    leaky = f"echo {refresh_token} {account.credentials['client_secret']} Bearer ya29.abc eyJhb.eyJzd.sig"
    emulator.fault(path="/events$", status=400, message=leaky)
    event = make_event()
    with pytest.raises(InvalidRequest) as caught:
        provider.upsert(account, event, target_for(event, account))
    text = str(caught.value)
    assert "echo ***" in text
    for secret in (refresh_token, "GOCSPX", "ya29.abc", "eyJhb"):
        assert secret not in text
    assert caught.value.__cause__ is None and caught.value.__suppress_context__

    emulator.control("DELETE", "faults")
    emulator.fault(path="^/token$", status=400, reason="invalid_grant", message=f"bad token {refresh_token}")
    fresh = dataclasses.replace(account, id="acct-2")
    with pytest.raises(AuthRevoked) as revoked:
        provider.upsert(fresh, event, target_for(event, fresh))
    assert refresh_token not in str(revoked.value)


def test_redaction_removes_private_keys_and_the_call_s_secrets() -> None:
    text = "key -----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY----- and hunter22"
    assert redact(text, ["hunter22"]) == "key *** and ***"

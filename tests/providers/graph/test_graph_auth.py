"""Tokens through msal against the emulator's Entra: expiry, one refresh after 401, rotation, revocation, policy."""

from __future__ import annotations

import dataclasses
from typing import Any

import msal
import pytest

from calsync.core.model.errors import AppCredentialsRejected, AuthRevoked, ConfigurationError, EntityNotFound, Forbidden
from calsync.providers.graph.classification import AccessPolicyDenied, MailboxNotEnabled
from calsync.providers.graph.credentials import read_graph_account
from calsync.providers.graph.provider import GraphProvider
from calsync_emulators.control import GraphControl
from tests.providers.graph.conftest import MakeAccount, MakeEvent, Rotations, graph_ops, target_for


def tokens(graph: GraphControl) -> list[tuple[str | None, str | None]]:
    """(grant, outcome) of every token request."""
    return [(r.get("grant"), r.get("outcome")) for r in graph.requests("token")]


def test_an_app_token_is_reused_until_it_expires_then_refreshed(
    provider: GraphProvider, graph: GraphControl, make_account: MakeAccount, make_event: MakeEvent
) -> None:
    account = make_account()
    for n in range(3):
        event = make_event(id=f"e{n}")
        provider.upsert(account, event, target_for(account, event))
    assert tokens(graph) == [("client_credentials", "issued")]
    graph.expire_tokens()  # the emulator rejects them now; msal still thinks they are fresh
    event = make_event(id="after-expiry")
    provider.upsert(account, event, target_for(account, event))
    assert tokens(graph) == [("client_credentials", "issued")] * 2
    assert graph_ops(graph)[-2:] == [("events.create", 401), ("events.create", 201)]


def test_a_live_app_token_is_served_without_asking_msal(
    provider: GraphProvider, make_account: MakeAccount, make_event: MakeEvent, monkeypatch: pytest.MonkeyPatch
) -> None:
    account = make_account()
    first = make_event(id="first")
    provider.upsert(account, first, target_for(account, first))
    asked: list[object] = []
    original = msal.ConfidentialClientApplication.acquire_token_for_client

    def counted(app: msal.ConfidentialClientApplication, *args: Any, **kwargs: Any) -> Any:
        asked.append(app)
        return original(app, *args, **kwargs)

    monkeypatch.setattr(msal.ConfidentialClientApplication, "acquire_token_for_client", counted)
    for n in range(3):
        event = make_event(id=f"e{n}")
        provider.upsert(account, event, target_for(account, event))
    assert asked == []  # msal's cache lookup per request cost ≈ 4 % of a create


def test_a_delegated_refresh_token_is_rotated_and_written_back(
    provider: GraphProvider, graph: GraphControl, make_account: MakeAccount, make_event: MakeEvent,
    rotations: Rotations,
) -> None:  # fmt: skip
    credentials = graph.user_credentials("alpha@example.com")
    account = make_account(credentials=credentials)
    event = make_event()
    provider.upsert(account, event, target_for(account, event))
    [(account_id, saved)] = rotations.saved
    assert account_id == account.id and saved["refresh_token"] != credentials["refresh_token"]
    assert {k: v for k, v in saved.items() if k != "refresh_token"} == {
        k: v for k, v in credentials.items() if k != "refresh_token"}  # fmt: skip
    # The next job loads the rotated credentials from the store: the same session goes on, no new grant.
    rotated = dataclasses.replace(account, credentials=saved)
    second = make_event(id="e2")
    provider.upsert(rotated, second, target_for(rotated, second))
    assert tokens(graph) == [("refresh_token", "issued")]


@pytest.mark.parametrize("code", [50173, 700082, 70043])
def test_revoked_consent_is_auth_revoked(
    code: int, provider: GraphProvider, graph: GraphControl, make_account: MakeAccount, make_event: MakeEvent
) -> None:
    account = make_account(credentials=graph.user_credentials("alpha@example.com"))
    graph.revoke_user("alpha@example.com", code=code)
    event = make_event()
    with pytest.raises(AuthRevoked) as caught:
        provider.upsert(account, event, target_for(account, event))
    assert f"AADSTS{code}" in str(caught.value) and not isinstance(caught.value, ConfigurationError)
    assert account.credentials["refresh_token"] not in str(caught.value)


def test_revocation_while_a_token_is_live_ends_in_auth_revoked_after_one_refresh(
    provider: GraphProvider, graph: GraphControl, make_account: MakeAccount, make_event: MakeEvent
) -> None:
    account = make_account(credentials=graph.user_credentials("alpha@example.com"))
    first = make_event()
    provider.upsert(account, first, target_for(account, first))
    graph.revoke_user("alpha@example.com")
    second = make_event(id="e2")
    with pytest.raises(AuthRevoked):
        provider.upsert(account, second, target_for(account, second))
    assert graph_ops(graph)[-1] == ("events.create", 401)
    assert [outcome for _, outcome in tokens(graph)] == ["issued", "AADSTS50173"]


@pytest.mark.parametrize(
    ("break_it", "code"),
    [
        (lambda g, c: {**c, "client_secret": "not-the-secret-42"}, "AADSTS7000215"),
        (lambda g, c: (g.expire_secret(), c)[1], "AADSTS7000222"),
        (lambda g, c: {**c, "client_id": "unknown-app"}, "AADSTS700016"),
    ],
)
def test_a_bad_app_secret_is_a_configuration_error_that_stops_the_account(
    break_it: object, code: str, provider: GraphProvider, graph: GraphControl, make_account: MakeAccount,
    make_event: MakeEvent,
) -> None:  # fmt: skip
    credentials = break_it(graph, graph.app_credentials())  # type: ignore[operator]
    account, event = make_account(credentials=credentials), make_event()
    with pytest.raises(AppCredentialsRejected) as caught:
        provider.upsert(account, event, target_for(account, event))
    assert code in str(caught.value)
    assert isinstance(caught.value, ConfigurationError) and isinstance(caught.value, AuthRevoked)
    assert "not-the-secret-42" not in str(caught.value)
    assert graph_ops(graph) == []


def test_a_mailbox_outside_the_application_access_policy_is_forbidden_naming_the_policy(
    provider: GraphProvider, graph: GraphControl, make_account: MakeAccount, make_event: MakeEvent
) -> None:
    graph.set_policy(["beta@example.com"])
    account, event = make_account(), make_event()
    with pytest.raises(AccessPolicyDenied) as caught:
        provider.upsert(account, event, target_for(account, event))
    assert isinstance(caught.value, Forbidden) and caught.value.reason == "blocked by application access policy"
    beta = make_account("beta@example.com")
    provider.upsert(beta, event, target_for(beta, event))
    assert len(graph.items("beta@example.com")) == 1


def test_a_mailbox_without_rest_is_permanent(
    provider: GraphProvider, graph: GraphControl, make_account: MakeAccount, make_event: MakeEvent
) -> None:
    graph.control("PUT", "graph/rest-disabled", {"mailboxes": ["alpha@example.com"]})
    account, event = make_account(), make_event()
    with pytest.raises(MailboxNotEnabled) as caught:
        provider.upsert(account, event, target_for(account, event))
    assert isinstance(caught.value, EntityNotFound)


@pytest.mark.parametrize(
    ("credentials", "named"),
    [
        ({"type": "client_credentials", "tenant_id": "t", "client_id": "c"}, "client_secret"),
        ({"type": "client_credentials", "tenant_id": "t", "client_id": "c", "certificate_pem": "x"}, "thumbprint"),
        ({"type": "refresh_token", "tenant_id": "t", "client_id": "c"}, "credentials.refresh_token"),
        ({"type": "client_credentials", "client_id": "c", "client_secret": "s"}, "credentials.tenant_id"),
        ({"type": "client_credentials", "tenant_id": "t", "client_id": "c", "client_secret": "s",
          "authority": "http://login.example"}, "credentials.authority"),
        ({"type": "password", "username": "u"}, "credentials"),
        ({"type": "client_credentials", "tenant_id": "t", "client_id": "c", "client_secret": "s", "extra": 1},
         "credentials.extra"),
    ],
)  # fmt: skip
def test_wrong_credentials_shapes_are_refused_naming_the_field(
    credentials: dict[str, object], named: str, make_account: MakeAccount
) -> None:
    with pytest.raises(ConfigurationError) as caught:
        read_graph_account(make_account(credentials=credentials))
    assert named in str(caught.value)
    assert "'s'" not in str(caught.value)


def test_short_lived_tokens_are_renewed_before_they_expire(
    provider: GraphProvider, graph: GraphControl, make_account: MakeAccount, make_event: MakeEvent
) -> None:
    graph.configure(token_lifetime=30)  # inside msal's and our early-refresh margins: every call renews
    app = make_account()
    user = make_account("beta@example.com", credentials=graph.user_credentials("beta@example.com"))
    for n in range(2):
        for account in (app, user):
            event = make_event(id=f"e{n}")
            provider.upsert(account, event, target_for(account, event))
    assert sorted(grant for grant, _ in tokens(graph)) == ["client_credentials"] * 2 + ["refresh_token"] * 2
    assert all(status != 401 for _, status in graph_ops(graph))

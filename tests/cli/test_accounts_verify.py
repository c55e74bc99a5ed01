"""``calsync accounts add``: credentials and options checked for the provider, and ``--verify`` making one live
call against the emulators: refused → exit 2, unreachable → exit 1, one line each, and nothing saved."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest

from calsync.core.config.settings import Settings
from calsync.core.model.calendar import Account
from calsync.core.model.errors import ConfigurationError
from calsync.core.store.crypto import generate_key
from calsync.providers.registry import validate_account
from calsync_emulators.control import GoogleControl, GraphControl
from calsync_emulators.graph import TlsIdentity
from calsync_emulators.server import RunningEmulator
from tests.cli.process import calsync, json_out, one_line_error

EWS_LOGIN = {"username": "svc@example.com", "password": "svc-password"}


@pytest.fixture
def settings(settings_factory: Any, exchange_server: RunningEmulator, emulator_tls: TlsIdentity) -> Settings:
    built: Settings = settings_factory(
        secret_key=generate_key(),
        graph_api_endpoint=GraphControl(exchange_server.url).api_endpoint,
        graph_ca_file=emulator_tls.ca_file,
    )
    json_out(calsync("migrate", settings=built))
    return built


def _add(settings: Settings, tmp_path: Path, provider: str, credentials: Any, *extra: str) -> Any:
    path = tmp_path / f"{provider}-credentials.json"
    path.write_text(json.dumps(credentials))
    return calsync("accounts", "add", "--tenant", "t", "--provider", provider, "--address", "alpha@example.com",
                   "--credentials-file", str(path), *extra, settings=settings)  # fmt: skip


def _stored(settings: Settings) -> list[str]:
    return [a["provider"] for a in json_out(calsync("accounts", "list", "--json", settings=settings))]


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.slow
def test_google_verify_refreshes_a_token_and_refuses_a_revoked_grant(
    settings: Settings, tmp_path: Path, google_server: RunningEmulator
) -> None:
    google = GoogleControl(google_server.url)
    good = google.user_credentials("1//verify-good", "calsync-client", "client-secret")
    assert json_out(_add(settings, tmp_path, "google", good, "--verify"))["account_id"]
    assert any(r["path"] == "/token" and r["status"] == 200 for r in google.requests())

    google.control("POST", "revoke", {"refresh_token": "1//verify-revoked"})
    revoked = google.user_credentials("1//verify-revoked", "calsync-client", "client-secret")
    line = one_line_error(_add(settings, tmp_path, "google", revoked, "--verify"), 2)
    assert line.startswith("calsync: error: --verify: google refused the credentials, nothing saved: ")
    assert "invalid_grant" in line and "1//verify-revoked" not in line

    unreachable = {**good, "token_uri": f"http://127.0.0.1:{_closed_port()}/token"}
    line = one_line_error(_add(settings, tmp_path, "google", unreachable, "--verify"), 1)
    assert line.startswith("calsync: error: --verify: google could not be reached, nothing saved: ")
    assert _stored(settings) == ["google"]


@pytest.mark.slow
def test_ews_verify_makes_one_getfolder_and_refuses_a_wrong_password(
    settings: Settings, tmp_path: Path, ews_server: RunningEmulator
) -> None:
    options = ("--option", f"server_url={ews_server.url}/EWS/Exchange.asmx", "--option", "auth_type=basic",
               "--option", "access_type=impersonation")  # fmt: skip
    assert json_out(_add(settings, tmp_path, "exchange", EWS_LOGIN, *options, "--verify"))["account_id"]
    wrong = {**EWS_LOGIN, "password": "not-the-password"}
    line = one_line_error(_add(settings, tmp_path, "exchange", wrong, *options, "--verify"), 2)
    assert "exchange refused the credentials, nothing saved" in line and "not-the-password" not in line
    assert _stored(settings) == ["exchange"]


@pytest.mark.slow
def test_graph_verify_gets_a_client_credentials_token_and_refuses_a_wrong_secret(
    settings: Settings, tmp_path: Path, exchange_server: RunningEmulator
) -> None:
    graph = GraphControl(exchange_server.url)
    assert json_out(_add(settings, tmp_path, "graph", graph.app_credentials(), "--verify"))["account_id"]
    wrong = graph.app_credentials(secret="wrong-secret")
    line = one_line_error(_add(settings, tmp_path, "graph", wrong, "--verify"), 2)
    assert "graph refused the credentials, nothing saved" in line and "wrong-secret" not in line
    assert _stored(settings) == ["graph"]


@pytest.mark.slow
def test_credentials_of_another_provider_are_refused_at_add(settings: Settings, tmp_path: Path) -> None:
    line = one_line_error(_add(settings, tmp_path, "google", EWS_LOGIN), 2)
    assert line.endswith("credentials must be Google's authorized_user or service_account JSON")
    server = "server_url=https://mail.example.com/EWS/Exchange.asmx"
    line = one_line_error(_add(settings, tmp_path, "exchange", EWS_LOGIN, "--option", server), 2)
    assert "options.auth_type: is required" in line
    assert _stored(settings) == []


@pytest.mark.parametrize(
    ("provider", "credentials", "options", "complaint"),
    [
        ("google", {"type": "service_account", "client_email": "a@b.c"}, {}, "lack private_key, token_uri"),
        ("google", {"refresh_token": "r", "client_id": "c", "client_secret": "s"}, {"calendar": "x"},
         "unknown option 'calendar' for provider google (allowed: calendar_id, delegate, max_concurrency, subject)"),
        ("google", {"refresh_token": "r", "client_id": "c", "client_secret": "s"}, {"delegate": "no"},
         "option 'delegate' must be a bool"),
        ("exchange", {"username": "u", "password": "p"}, {"auth_type": "basic"},
         "server_url is required unless autodiscover is true"),
        ("exchange", {"username": "u", "password": "p"}, {"auth_type": "oauth2", "server_url": "https://m.example/EWS"},
         "credentials.client_id: is required"),
    ],
)  # fmt: skip
def test_the_provider_s_required_shape_is_named(
    provider: Any, credentials: dict[str, Any], options: dict[str, Any], complaint: str
) -> None:
    account = Account("acc_x", "t", provider, "alpha@example.com", credentials=credentials, options=options)
    with pytest.raises(ConfigurationError, match="acc_x") as raised:
        validate_account(account)
    assert complaint in str(raised.value)

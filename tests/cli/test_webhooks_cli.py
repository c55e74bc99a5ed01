"""``calsync webhooks``: the secret printed once and stored encrypted, refusals with their reason, the operations."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from click.testing import CliRunner, Result
from standardwebhooks.webhooks import Webhook

from calsync.actors.cli.main import cli
from calsync.core.config.settings import Settings
from calsync.core.store import migrate
from calsync.core.store.crypto import generate_key
from calsync.core.store.database import Database
from calsync.core.store.schema import webhook_endpoints
from calsync.core.webhooks.model import request_headers


@pytest.fixture
def settings(settings_factory: Any) -> Settings:
    built: Settings = settings_factory(secret_key=generate_key(), webhook_allow_http=True)
    migrate.migrate_to(Database(built.effective_database_url))
    return built


def _run(settings: Settings, *args: str, **env: str) -> Result:
    return CliRunner().invoke(cli, list(args), env={**settings.as_environment(), **env}, catch_exceptions=False)


def _json(result: Result) -> Any:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_add_list_rotate_disable_enable_remove(settings: Settings) -> None:
    allowed = {"CALSYNC_WEBHOOK_ALLOWED_NETWORKS": "127.0.0.0/8"}
    added = _json(_run(settings, "webhooks", "add", "--tenant", "t1", "--url", "http://127.0.0.1:9/hooks",
                       "--events", "sync.succeeded,event.cancelled", **allowed))  # fmt: skip
    secret, endpoint_id = added["secret"], added["id"]
    assert secret.startswith("whsec_") and added["events"] == ["sync.succeeded", "event.cancelled"]
    headers = request_headers([secret], "msg_1", int(time.time()), b"{}")
    assert Webhook(secret).verify(b"{}", headers) == {}  # a verifier we did not write reads the secret's format

    with Database(settings.effective_database_url).engine.connect() as conn:
        (stored,) = conn.execute(webhook_endpoints.select()).fetchall()
    assert secret.encode() not in stored.secrets and secret[6:].encode() not in stored.secrets  # encrypted

    listed = _json(_run(settings, "webhooks", "list", "--json"))
    assert [e["id"] for e in listed] == [endpoint_id] and "secret" not in listed[0]
    assert "webhook endpoints" in _run(settings, "webhooks", "list").stdout

    rotated = _json(_run(settings, "webhooks", "rotate-secret", endpoint_id))
    assert rotated["secret"] != secret and rotated["previous_secret_expires_at"] is not None

    disabled = _json(_run(settings, "webhooks", "disable", endpoint_id, "--reason", "maintenance"))
    assert (disabled["status"], disabled["disabled_by"], disabled["disabled_reason"]) == (
        "disabled", "operator", "maintenance")  # fmt: skip
    assert _json(_run(settings, "webhooks", "enable", endpoint_id))["status"] == "enabled"
    assert _json(_run(settings, "webhooks", "remove", endpoint_id)) == {"removed": endpoint_id}
    assert _json(_run(settings, "webhooks", "list", "--json")) == []
    missing = _run(settings, "webhooks", "enable", endpoint_id)
    assert missing.exit_code != 0 and f"no webhook endpoint {endpoint_id}" in missing.output


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (("--url", "http://127.0.0.1/hooks", "--events", "sync.succeeded"), "loopback"),
        (("--url", "http://169.254.169.254/", "--events", "sync.succeeded"), "link-local"),
        (("--url", "http://10.0.0.1/", "--events", "sync.succeeded"), "private"),
        (("--url", "http://127.0.0.1/", "--events", "sync.exploded"), "unknown event types"),
        (("--url", "http://127.0.0.1/", "--events", ","), "at least one event type"),
    ],
)
def test_refusals_name_their_reason_and_store_nothing(settings: Settings, args: tuple[str, ...], why: str) -> None:
    result = _run(settings, "webhooks", "add", "--tenant", "t1", *args)
    assert result.exit_code != 0 and why in result.output
    assert _json(_run(settings, "webhooks", "list", "--json")) == []


def test_https_is_required_without_the_development_setting(settings_factory: Any) -> None:
    built: Settings = settings_factory(secret_key=generate_key())
    migrate.migrate_to(Database(built.effective_database_url))
    result = _run(built, "webhooks", "add", "--tenant", "t1", "--url", "http://hooks.example.com/", "--events",
                  "sync.succeeded")  # fmt: skip
    assert result.exit_code != 0 and "must be https" in result.output

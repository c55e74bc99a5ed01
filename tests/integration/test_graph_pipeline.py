"""Graph end to end: producer → real broker and worker threads → GraphProvider (httpx + msal) → Exchange emulator.

The worker's registry gives the adapter the Redis mailbox limiter and the database credentials writer.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from calsync.core.config.settings import Settings
from calsync.core.model.markers import SYNC_KEY_PROPERTY_NAME
from calsync.core.store import accounts
from calsync.core.store.crypto import generate_key
from calsync_emulators.control import GraphControl
from calsync_emulators.graph.tls import TlsIdentity
from calsync_emulators.server import RunningEmulator
from tests.integration.provider_support import TENANT, add_account, cli_json, run_cli, wait_synced
from tests.providers.exchange.ews_support import LOGINS
from tests.support import Pipeline, wait_until

pytestmark = pytest.mark.integration

MakePipeline = Callable[..., Pipeline]


@pytest.fixture
def graph(stamped_exchange_server: RunningEmulator) -> GraphControl:
    """The module's Exchange server emulator (EWS + Graph), reset for this test."""
    control = GraphControl(stamped_exchange_server.url)
    control.reset()
    return control


@pytest.fixture
def pipeline(settings_factory: Any, graph: GraphControl, emulator_tls: TlsIdentity) -> Iterator[Pipeline]:
    """A pipeline whose Graph adapter points at the emulator (and whose Exchange adapter at its EWS)."""
    settings = settings_factory(secret_key=generate_key(), worker_threads=8, graph_api_endpoint=graph.api_endpoint,
                                graph_ca_file=emulator_tls.ca_file)  # fmt: skip
    built = Pipeline(settings)
    yield built
    built.app.providers.close()
    built.close()


def write(path: Path, payload: Any) -> str:
    """A credentials file for the CLI."""
    path.write_text(json.dumps(payload))
    return str(path)


def graph_ops(graph: GraphControl, since: int = 0) -> list[str | None]:
    """The operations of every Graph API request since ``since``."""
    return [r.get("operation") for r in graph.requests()[since:] if r["path"].startswith("/v1.0/")]


def test_migration_from_ews_to_graph_adopts_every_item_exactly_once(
    pipeline: Pipeline, graph: GraphControl, tmp_path: Path
) -> None:
    settings: Settings = pipeline.settings
    ews_options = {"server_url": graph.server_url, "auth_type": "basic", "access_type": "impersonation"}
    account = add_account(pipeline, "exchange", "alpha@example.com", LOGINS["svc"], ews_options, account_id="acc-a")
    receipts = [pipeline.submit([account], title=f"Event {n} v1") for n in range(3)]
    with pipeline.worker():
        wait_synced(pipeline, {(r.entity_id, account): 1 for r in receipts})
    assert len(graph.items("alpha@example.com")) == 3 and graph_ops(graph) == []

    moved = cli_json(settings, "accounts", "update", account, "--provider", "graph",
                     "--credentials-file", write(tmp_path / "graph.json", graph.app_credentials()))  # fmt: skip
    assert (moved["provider"], moved["status"]) == ("graph", "active")
    for n, receipt in enumerate(receipts):
        pipeline.submit(None, entity_id=receipt.entity_id, title=f"Event {n} v2")
    with pipeline.worker():
        wait_synced(pipeline, {(r.entity_id, account): 2 for r in receipts})

    items = graph.items("alpha@example.com")
    assert sorted(i["subject"] for i in items) == ["Event 0 v2", "Event 1 v2", "Event 2 v2"]
    assert sorted(i["extended_properties"][SYNC_KEY_PROPERTY_NAME] for i in items) == sorted(
        f"{TENANT}:{r.entity_id}:{account}" for r in receipts)  # fmt: skip
    assert "events.create" not in graph_ops(graph)
    assert {(pipeline.target(r.entity_id, account).external_etag or "")[:3] for r in receipts} == {'W/"'}


def test_revoked_consent_dead_letters_then_update_and_replay_sync_once(
    pipeline: Pipeline, graph: GraphControl, tmp_path: Path
) -> None:
    settings: Settings = pipeline.settings
    first = graph.user_credentials("alpha@example.com")
    added = cli_json(settings, "accounts", "add", "--tenant", TENANT, "--provider", "graph", "--address",
                     "alpha@example.com", "--credentials-file", write(tmp_path / "u.json", first))  # fmt: skip
    account = added["account_id"]
    with pipeline.worker():
        created = pipeline.submit([account], title="Standup v1")
        wait_synced(pipeline, {(created.entity_id, account): 1})
    with pipeline.clients.db.read() as conn:
        stored = accounts.load_account(conn, account, pipeline.clients.cipher)
    assert stored is not None and stored.credentials["refresh_token"] != first["refresh_token"]  # rotated, stored

    graph.revoke_user("alpha@example.com")
    with pipeline.worker():
        pipeline.submit(None, entity_id=created.entity_id, title="Standup v2")
        pipeline.wait_target(created.entity_id, account, "failed")
    [record] = cli_json(settings, "dlq", "list", "--account", account, "--json")
    assert (record["reason"], record["error_class"], record["attempts"]) == ("needs re-authorization", "AuthRevoked", 1)
    assert "AADSTS50173" in record["last_error"]
    [summary] = cli_json(settings, "accounts", "list", "--tenant", TENANT, "--json")
    assert summary["status"] == "needs_reauth"

    fresh = write(tmp_path / "u2.json", graph.user_credentials("alpha@example.com"))
    assert cli_json(settings, "accounts", "update", account, "--credentials-file", fresh)["status"] == "active"
    mark = len(graph.requests())
    report = cli_json(settings, "dlq", "replay", "--account", account, "--json")
    assert len(report["replayed"]) == 1
    with pipeline.worker():
        wait_synced(pipeline, {(created.entity_id, account): 2})
    assert graph_ops(graph, mark) == ["events.update"]
    [item] = graph.items("alpha@example.com")
    assert item["subject"] == "Standup v2"
    assert cli_json(settings, "dlq", "list", "--account", account, "--json") == []


def test_an_application_access_policy_403_dead_letters_with_that_reason(
    pipeline: Pipeline, graph: GraphControl
) -> None:
    graph.set_policy(["someone-else@example.com"])
    account = add_account(pipeline, "graph", "alpha@example.com", graph.app_credentials(), account_id="acc-p")
    with pipeline.worker():
        receipt = pipeline.submit([account], title="Blocked")
        pipeline.wait_target(receipt.entity_id, account, "failed")
    [record] = pipeline.dead_letters(account_id=account)
    assert record.reason == "blocked by application access policy"  # type: ignore[attr-defined]
    assert record.attempts == 1  # type: ignore[attr-defined]


def test_accounts_add_refuses_a_wrong_graph_credentials_shape_naming_the_field(
    pipeline: Pipeline, tmp_path: Path
) -> None:
    bad = write(tmp_path / "bad.json", {"type": "client_credentials", "tenant_id": "t", "client_id": "c"})
    result = run_cli(pipeline.settings, "accounts", "add", "--tenant", TENANT, "--provider", "graph",
                     "--address", "alpha@example.com", "--credentials-file", bad)  # fmt: skip
    assert result.exit_code != 0 and "client_secret" in result.output
    assert cli_json(pipeline.settings, "accounts", "list", "--json") == []


def test_each_graph_request_takes_the_mailbox_slot_and_gives_it_back(
    pipeline: Pipeline, graph: GraphControl, monkeypatch: pytest.MonkeyPatch
) -> None:
    account = add_account(pipeline, "graph", "alpha@example.com", graph.app_credentials(), account_id="acc-w")
    slots = pipeline.clients.keys.slots("graph:calsync-client:alpha@example.com")
    sent: list[str] = []
    client = pipeline.clients.redis  # the limiter's, as the locks' and traffic control's
    real = client.execute_command

    def execute_command(*args: Any, **options: Any) -> Any:
        if slots in args:
            sent.append(args[0])
        return real(*args, **options)

    monkeypatch.setattr(client, "execute_command", execute_command)
    receipts = [pipeline.submit([account], title=f"Slot {n}") for n in range(3)]
    with pipeline.worker(threads=1):
        wait_synced(pipeline, {(receipt.entity_id, account): 1 for receipt in receipts})
    assert sent == ["EVALSHA", "ZREM"] * 3  # one request per create: the slot's two round trips
    assert client.zcard(slots) == 0


def test_a_throttling_burst_with_retry_after_is_honoured_then_synced(pipeline: Pipeline, graph: GraphControl) -> None:
    account = add_account(pipeline, "graph", "alpha@example.com", graph.app_credentials(), account_id="acc-t")
    graph.add_fault(operation="events.create", status=429, reason="TooManyRequests", retry_after=1, times=2)
    with pipeline.worker():
        receipt = pipeline.submit([account], title="Throttled")
        wait_synced(pipeline, {(receipt.entity_id, account): 1})
    creates = [r for r in graph.requests() if r.get("operation") == "events.create"]
    assert [r["status"] for r in creates] == [429, 429, 201]
    assert creates[1]["at"] - creates[0]["at"] >= 1 and creates[2]["at"] - creates[1]["at"] >= 1
    assert len(graph.items()) == 1
    wait_until(lambda: pipeline.outcomes().get("success") == 1, what="the success to be counted")


def test_mailbox_concurrency_throttling_defers_without_using_an_attempt(
    pipeline: Pipeline, graph: GraphControl
) -> None:
    account = add_account(pipeline, "graph", "alpha@example.com", graph.app_credentials(), account_id="acc-c")
    graph.add_fault(operation="events.create", status=429, reason="ApplicationThrottled",
                    message="Application is over its MailboxConcurrency limit.", retry_after=1, times=2)  # fmt: skip
    with pipeline.worker():
        receipt = pipeline.submit([account], title="Busy mailbox")
        wait_synced(pipeline, {(receipt.entity_id, account): 1})
        wait_until(lambda: pipeline.outcomes().get("success") == 1, what="the success to be counted")
    outcomes = pipeline.outcomes()
    assert "retry_scheduled" not in outcomes and "dead_lettered" not in outcomes
    assert len(graph.items()) == 1


def test_a_wrong_app_secret_stops_the_account_after_one_token_request(pipeline: Pipeline, graph: GraphControl) -> None:
    credentials = {**graph.app_credentials(), "client_secret": "not-the-secret-7"}
    account = add_account(pipeline, "graph", "alpha@example.com", credentials, account_id="acc-s")
    with pipeline.worker():
        first = pipeline.submit([account], title="One")
        pipeline.wait_target(first.entity_id, account, "failed")
        second = pipeline.submit([account], title="Two")
        pipeline.wait_target(second.entity_id, account, "failed")
    records = pipeline.dead_letters(account_id=account)
    assert sorted(r.reason for r in records) == ["app credentials rejected", "needs re-authorization"]  # type: ignore[attr-defined]
    assert [r.get("outcome") for r in graph.requests("token")] == ["AADSTS7000215"]  # no retry storm against Entra
    [summary] = cli_json(pipeline.settings, "accounts", "list", "--tenant", TENANT, "--json")
    assert summary["status"] == "needs_reauth"

"""``calsync accounts`` through the real console script: registrations refused as submit refuses them, one account per
mailbox and tenant even when added at the same moment, and ``accounts remove [--detach]`` with a running worker."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest

from calsync.core.config.settings import Settings
from calsync.core.store.crypto import generate_key
from calsync.providers.memory import MemoryProvider
from tests.cli.process import calsync, change_file, json_out, one_line_error
from tests.observability.conftest import running
from tests.support import in_threads, wait_until

_EWS_OPTIONS = ("--option", "server_url=https://mail.example.com/EWS/Exchange.asmx", "--option", "auth_type=basic")
_CREDENTIALS = {
    "google": {"type": "authorized_user", "client_id": "c", "client_secret": "s", "refresh_token": "1//r"},
    "exchange": {"username": "svc@example.com", "password": "p"},
    "graph": {"type": "client_credentials", "tenant_id": "t", "client_id": "c", "client_secret": "s"},
}


@pytest.fixture
def settings(settings_factory: Any, tmp_path: Path) -> Settings:
    with socket.socket() as probe:  # the worker's metrics server: a port of its own
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    built: Settings = settings_factory(
        secret_key=generate_key(), metrics_port=port,
        maintenance_interval=0.2, delete_verify_delay=0,
    )  # fmt: skip
    json_out(calsync("migrate", settings=built))
    return built


def _listed(settings: Settings) -> list[dict[str, Any]]:
    return list(json_out(calsync("accounts", "list", "--json", settings=settings)))


def _add_mailbox(settings: Settings, tmp_path: Path, provider: str, address: str = "alice@example.com") -> Any:
    path = tmp_path / f"{provider}.json"
    path.write_text(json.dumps(_CREDENTIALS[provider]))
    options = _EWS_OPTIONS if provider == "exchange" else ()
    return calsync("accounts", "add", "--tenant", "acme", "--provider", provider, "--address", address,
                   "--credentials-file", str(path), *options, settings=settings)  # fmt: skip


@pytest.mark.parametrize("tenant", ["", " acme ", "a" * 5000])
def test_a_tenant_submit_refuses_is_refused_and_nothing_is_saved(settings: Settings, tenant: str) -> None:
    done = calsync("accounts", "add", "--tenant", tenant, "--provider", "memory", "--address", "a@example.com",
                   settings=settings)  # fmt: skip
    line = one_line_error(done, 2)
    assert "--tenant: " in line and "is not a valid identifier" in line and len(line) < 300
    assert _listed(settings) == []


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        (("--provider", "google", "--address", "not an email", "--credentials-file", "google.json"),
         "address 'not an email' is not a calendar id"),
        (("--provider", "memory", "--address", "a@example.com", "--option", "colour=blue"),
         "unknown option 'colour' for provider memory (allowed: max_concurrency)"),
        (("--provider", "memory", "--address", "a@example.com", "--id", "acc 1"), "--id: 'acc 1' is not a valid"),
    ],
)  # fmt: skip
def test_an_address_option_or_id_the_provider_cannot_take_is_refused(
    settings: Settings, tmp_path: Path, args: tuple[str, ...], complaint: str
) -> None:
    (tmp_path / "google.json").write_text(json.dumps(_CREDENTIALS["google"]))  # otherwise acceptable credentials
    args = tuple(str(tmp_path / a) if a == "google.json" else a for a in args)
    line = one_line_error(calsync("accounts", "add", "--tenant", "acme", *args, settings=settings), 2)
    assert complaint in line
    assert _listed(settings) == []


def test_one_mailbox_is_registered_once_over_ews_and_graph(settings: Settings, tmp_path: Path) -> None:
    first = json_out(_add_mailbox(settings, tmp_path, "exchange"))["account_id"]
    line = one_line_error(_add_mailbox(settings, tmp_path, "graph", "Alice@Example.com"), 2)
    assert f"account {first} (exchange, alice@example.com) of tenant acme already writes into this calendar" in line
    json_out(_add_mailbox(settings, tmp_path, "graph", "bob@example.com"))
    assert [a["calendar_key"] for a in _listed(settings)] == ["exchange:alice@example.com", "exchange:bob@example.com"]


@pytest.mark.slow
@pytest.mark.both_databases
def test_concurrent_registrations_of_one_mailbox_leave_one_account(settings: Settings, tmp_path: Path) -> None:
    done: list[Any] = [None] * 4
    in_threads(lambda n: done.__setitem__(n, _add_mailbox(settings, tmp_path, ("exchange", "graph")[n % 2])), 4)
    [winner] = [json.loads(d.stdout)["account_id"] for d in done if d.returncode == 0]
    for loser in (d for d in done if d.returncode != 0):
        assert f"account {winner} (" in one_line_error(loser, 2)
    assert [a["account_id"] for a in _listed(settings)] == [winner]


def test_removing_an_unknown_account_or_one_with_events_is_refused(settings: Settings, tmp_path: Path) -> None:
    assert "account nope does not exist" in one_line_error(calsync("accounts", "remove", "nope", settings=settings), 2)
    calsync("accounts", "add", "--tenant", "acme", "--provider", "memory", "--address", "a@example.com", "--id", "a",
            settings=settings)  # fmt: skip
    json_out(calsync("submit", "--tenant", "acme", "--file", change_file(tmp_path, "a"), settings=settings))
    line = one_line_error(calsync("accounts", "remove", "a", settings=settings), 2)
    assert "account a still has 1 event(s)" in line and "`calsync accounts remove a --detach`" in line
    assert [(a["account_id"], a["status"]) for a in _listed(settings)] == [("a", "active")]
    idle = json_out(calsync("accounts", "add", "--tenant", "acme", "--provider", "memory", "--address",
                            "b@example.com", settings=settings))["account_id"]  # fmt: skip
    removed = json_out(calsync("accounts", "remove", idle, settings=settings))
    assert removed == {"account_id": idle, "status": "removed", "detached_events": 0, "job_ids": [],
                       "deferred_events": [], "targets_left": 0}  # fmt: skip


@pytest.mark.slow
def test_detach_deletes_calsyncs_events_from_the_calendar_once_through_a_worker_then_removes_the_account(
    settings: Settings, tmp_path: Path
) -> None:
    for account, address in (("gone", "gone@example.com"), ("kept", "kept@example.com")):
        json_out(calsync("accounts", "add", "--tenant", "acme", "--provider", "memory", "--address", address,
                         "--id", account, settings=settings))  # fmt: skip
    receipt = json_out(calsync("submit", "--tenant", "acme", "--file", change_file(tmp_path, "gone", "kept"),
                               settings=settings))  # fmt: skip
    calendar = MemoryProvider(settings.effective_memory_provider_path)

    def effects(account: str) -> list[str | None]:
        return [c.effect for c in calendar.calls() if c.account_id == account]

    with running(settings, ["worker", "--processes", "1", "--threads", "2"], tmp_path / "worker.log"):
        wait_until(lambda: effects("gone") == ["created"] and effects("kept") == ["created"], what="both creates")
        report = json_out(calsync("accounts", "remove", "gone", "--detach", settings=settings))
        assert report["detached_events"] == 1 and len(report["job_ids"]) == 1
        wait_until(lambda: [a["account_id"] for a in _listed(settings)] == ["kept"], what="the account removed")
    assert effects("gone") == ["created", "deleted"] and effects("kept") == ["created"]
    assert [e.status for e in calendar.events("gone")] == ["cancelled"]
    shown = json_out(calsync("events", "show", receipt["entity_id"], "--tenant", "acme", "--json", settings=settings))
    assert shown["version"] == 2 and [t["account_id"] for t in shown["targets"]] == ["kept"]

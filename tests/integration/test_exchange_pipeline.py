"""Exchange end to end: producer → real broker and worker threads → ExchangeProvider on exchangelib → EWS emulator."""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from calsync.core.config.settings import Settings
from calsync.core.model.markers import SYNC_KEY_PROPERTY_NAME
from calsync.core.producer.reconcile import reconcile
from calsync.core.store.crypto import generate_key
from calsync_emulators.control import EwsControl
from calsync_emulators.server import RunningEmulator
from tests.integration.provider_support import (
    TENANT,
    add_account,
    cli_json,
    run_cli,
    targets_of,
    wait_synced,
)
from tests.providers.exchange.ews_support import LOGINS
from tests.support import Pipeline, wait_until

pytestmark = pytest.mark.integration

MakePipeline = Callable[..., Pipeline]


@pytest.fixture
def ews(stamped_ews_server: RunningEmulator) -> EwsControl:
    """The module's EWS emulator, reset for this test, through its control API."""
    control = EwsControl(stamped_ews_server.url)
    control.reset()
    return control


@pytest.fixture
def make_pipeline(settings_factory: Any, ews: EwsControl) -> Iterator[MakePipeline]:
    """Worker-side runtimes whose Exchange adapter (built by the provider registry) pools 8 connections."""
    built: list[Pipeline] = []

    def make(**overrides: Any) -> Pipeline:
        settings = settings_factory(**{"secret_key": generate_key(), "worker_threads": 8, **overrides})
        built.append(Pipeline(settings))
        return built[-1]

    yield make
    for pipeline in built:
        pipeline.app.providers.get("exchange").close()  # type: ignore[attr-defined]
        pipeline.close()


@pytest.fixture
def pipeline(make_pipeline: MakePipeline) -> Pipeline:
    """An Exchange-ready pipeline with the test-scale retry schedule."""
    return make_pipeline()


def ews_options(ews: EwsControl) -> dict[str, str]:
    """Basic auth against the emulator, the service account impersonating each mailbox."""
    return {"server_url": f"{ews.base_url}/EWS/Exchange.asmx", "auth_type": "basic", "access_type": "impersonation"}


def mailbox_account(pipeline: Pipeline, ews: EwsControl, name: str) -> str:
    """The mailbox ``{name}@example.com``, reached by the service account."""
    return add_account(
        pipeline, "exchange", f"{name}@example.com", LOGINS["svc"], ews_options(ews), account_id=f"acc-{name}"
    )


def operations(ews: EwsControl, since: int = 0) -> list[tuple[str | None, int | None]]:
    """(SOAP operation, HTTP status) of every request in arrival order."""
    return [(r.get("operation"), r["status"]) for r in ews.requests()[since:]]


def retry_errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    """Error classes of the job attempts the workers scheduled a retry for, in order."""
    return [
        r.fields["error_class"]  # type: ignore[attr-defined]
        for r in caplog.records
        if r.name == "calsync.jobs" and getattr(r, "fields", {}).get("outcome") == "retry_scheduled"
    ]


def test_a_lost_create_item_response_ends_with_exactly_one_item(pipeline: Pipeline, ews: EwsControl) -> None:
    account = mailbox_account(pipeline, ews, "alpha")
    ews.add_fault(operation="CreateItem", after=True, drop=True, times=1)  # created, but the answer never arrives

    receipt = pipeline.submit([account], title="Budget review")
    with pipeline.worker():
        wait_synced(pipeline, {(receipt.entity_id, account): 1})

    [item] = ews.items("alpha@example.com")
    row = pipeline.target(receipt.entity_id, account)
    assert (item["id"], item["change_key"], item["subject"]) == (row.external_id, row.external_etag, "Budget review")
    assert item["extended_properties"] == {SYNC_KEY_PROPERTY_NAME: f"{TENANT}:{receipt.entity_id}:{account}"}
    # 09:00 in Europe/Berlin as submitted (the stored event comes back with a fixed offset, not a zone name).
    assert (item["start"], item["start_time_zone"]) == ("2026-12-01T09:00:00+01:00", "W. Europe Standard Time")
    # The first create skips the lookup (no create was sent before); the retry finds the item by its sync key and
    # adopts it instead of creating a second one.
    soap = [op for op, _ in operations(ews) if op != "GetFolder"]
    assert soap == ["CreateItem", "FindItem", "UpdateItem"]
    # A lone failure's first try again is the traffic gate's grace (held, no attempt: docs/notes/traffic.md).
    assert pipeline.outcomes() == {"deferred": 1, "success": 1}


def test_server_busy_back_off_is_honoured_then_the_event_is_synced(
    make_pipeline: MakePipeline, ews: EwsControl, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="calsync.jobs")
    pipeline = make_pipeline(retry_schedule=(0.05, 0.05, 0.05), retry_jitter=0)
    account = mailbox_account(pipeline, ews, "alpha")
    # A throttling burst: two ErrorServerBusy faults asking for 0.6 s of back-off each.
    ews.add_fault(operation="CreateItem", reason="ErrorServerBusy", level="fault", retry_after=0.6, times=2)

    receipt = pipeline.submit([account], title="Throttled")
    with pipeline.worker():
        wait_synced(pipeline, {(receipt.entity_id, account): 1})

    log = [r for r in ews.requests() if r.get("operation") in ("FindItem", "CreateItem")]
    assert [(r["operation"], r.get("fault")) for r in log] == [
        ("CreateItem", "ErrorServerBusy"),
        ("FindItem", None), ("CreateItem", "ErrorServerBusy"),
        ("FindItem", None), ("CreateItem", None),
    ]  # fmt: skip
    busy = [n for n, r in enumerate(log) if r.get("fault")]
    # Lower bound only: the next attempt waits out BackOffMilliseconds, not the schedule's 0.05 s.
    assert all(log[n + 1]["at"] - log[n]["at"] >= 0.6 for n in busy)
    assert retry_errors(caplog) == ["RateLimited", "RateLimited"]
    assert pipeline.outcomes() == {"retry_scheduled": 2, "success": 1}
    [item] = ews.items()
    assert item["id"] == pipeline.target(receipt.entity_id, account).external_id


def test_eight_threads_across_three_mailboxes_end_to_end_without_cross_talk(
    pipeline: Pipeline, ews: EwsControl
) -> None:
    names = ["alpha", "bravo", "charlie"]
    accounts = [mailbox_account(pipeline, ews, name) for name in names]
    latest: dict[str, tuple[int, str, str]] = {}  # entity -> (version, subject, location)
    wanted: dict[tuple[str, str], int] = {}
    entities = []
    for n in range(18):
        mine = [accounts[n % 3]] if n % 2 else [accounts[n % 3], accounts[(n + 1) % 3]]
        receipt = pipeline.submit(mine, title=f"Event {n} v1", location=f"Room {n}")
        entities.append((receipt.entity_id, mine, n))
        latest[receipt.entity_id] = (1, f"Event {n} v1", f"Room {n}")
        wanted.update({(receipt.entity_id, a): 1 for a in mine})
    # The three mailboxes connect in parallel (no process-wide lock) and eight creates are in flight at
    # once on the shared pool (sized to the worker threads): barriers prove both without timing.
    ews.add_barrier("GetFolder", parties=3)
    ews.add_barrier("CreateItem", parties=8)

    with pipeline.worker(threads=8):
        for entity, mine, n in entities[::3]:  # edits racing the workers
            receipt = pipeline.submit(None, entity_id=entity, title=f"Event {n} v2", location=f"Hall {n}")
            latest[entity] = (receipt.version, f"Event {n} v2", f"Hall {n}")
            wanted.update({(entity, a): receipt.version for a in mine})
        wait_synced(pipeline, wanted)

    barriers = [r["barrier"] for r in ews.requests() if "barrier" in r]
    assert barriers == ["met"] * (3 + 8)
    assert all(status == 200 for _, status in operations(ews))
    rows = {(r.event_id, r.account_id): r for r in targets_of(pipeline, wanted)}
    for name, account in zip(names, accounts, strict=True):
        items = ews.items(f"{name}@example.com")
        assert len(items) == sum(1 for _, a in wanted if a == account)
        for item in items:
            tenant, entity, owner = item["extended_properties"][SYNC_KEY_PROPERTY_NAME].split(":")
            assert (tenant, owner) == (TENANT, account)
            _, subject, location = latest[entity]
            assert (item["subject"], item["location"]) == (subject, location)
            # What the worker recorded is this very item's answer, not another thread's.
            row = rows[entity, owner]
            assert (item["id"], item["change_key"]) == (row.external_id, row.external_etag)


def test_a_wrong_password_dead_letters_without_a_retry_storm_and_replay_after_the_fix_syncs_once(
    pipeline: Pipeline, ews: EwsControl, tmp_path: Path
) -> None:
    settings: Settings = pipeline.settings
    creds_file = tmp_path / "svc.json"
    creds_file.write_text(json.dumps({"username": "svc@example.com", "password": "not-the-password"}))
    options = [f"--option={key}={value}" for key, value in ews_options(ews).items()]
    added = cli_json(settings, "accounts", "add", "--tenant", TENANT, "--provider", "exchange",
                     "--address", "alpha@example.com", "--credentials-file", str(creds_file), *options)  # fmt: skip
    account = added["account_id"]

    with pipeline.worker():
        first = pipeline.submit([account], title="Standup v1")
        pipeline.wait_target(first.entity_id, account, "failed")
        # The account is marked: later jobs fail at once, without sending the bad password again.
        pipeline.submit(None, entity_id=first.entity_id, title="Standup v2")
        second = pipeline.submit([account], title="Retro")
        wait_until(lambda: len(pipeline.dead_letters(account_id=account)) == 3, what="three dead letters")

    assert operations(ews) == [("GetFolder", 401)]  # one request reached Exchange, then nothing: no lock-out risk
    assert pipeline.outcomes() == {"dead_lettered": 3}
    records = cli_json(settings, "dlq", "list", "--account", account, "--json")
    assert len(records) == 3
    assert {(r["reason"], r["error_class"], r["attempts"]) for r in records} == {
        ("needs re-authorization", "AuthRevoked", 1)}  # fmt: skip
    assert all("not-the-password" not in (r["last_error"] or "") for r in records)
    [summary] = cli_json(settings, "accounts", "list", "--tenant", TENANT, "--json")
    assert summary["status"] == "needs_reauth"

    refused = run_cli(settings, "dlq", "replay", "--account", account)
    assert refused.exit_code == 0 and json.loads(refused.stdout)["replayed"] == [] and "re-authorize" in refused.stdout

    creds_file.write_text(json.dumps(LOGINS["svc"]))
    updated = cli_json(settings, "accounts", "update", account, "--credentials-file", str(creds_file))
    assert updated["status"] == "active"
    mark = len(ews.requests())
    report = cli_json(settings, "dlq", "replay", "--account", account, "--json")
    assert len(report["replayed"]) == 3 and report["skipped"] == []

    def replays_settled() -> bool:
        outcomes = pipeline.outcomes()
        return outcomes.get("success", 0) + outcomes.get("stale", 0) == 3

    with pipeline.worker():
        wait_synced(pipeline, {(first.entity_id, account): 2, (second.entity_id, account): 1})
        wait_until(replays_settled, what="the three replayed jobs to finish")  # the stale one may wait for the lock

    # Exactly once: the replayed v1 create of the first event is stale (v2 is wanted); one create per event.
    creates = [r for r in ews.requests()[mark:] if r.get("operation") == "CreateItem"]
    assert [r["response_codes"] for r in creates] == [["NoError"], ["NoError"]]
    assert not [r for r in ews.requests()[mark:] if r.get("operation") in ("UpdateItem", "DeleteItem")]
    assert sorted(i["subject"] for i in ews.items("alpha@example.com")) == ["Retro", "Standup v2"]
    outcomes = pipeline.outcomes()
    assert (outcomes["dead_lettered"], outcomes["stale"], outcomes["success"]) == (3, 1, 2)
    assert "retry_scheduled" not in outcomes
    assert cli_json(settings, "dlq", "list", "--account", account, "--json") == []
    again = run_cli(settings, "dlq", "replay", "--account", account)
    assert again.exit_code == 0 and json.loads(again.stdout) == {"replayed": [], "skipped": []}


@pytest.mark.both_databases
def test_a_first_create_is_one_ews_request(pipeline: Pipeline, ews: EwsControl) -> None:
    # No create was ever sent for a target the producer just inserted (its create marker), so no lookup.
    account = mailbox_account(pipeline, ews, "alpha")
    receipts = [pipeline.submit([account], title=f"Event {n}") for n in range(3)]
    with pipeline.worker():
        wait_synced(pipeline, {(r.entity_id, account): 1 for r in receipts})
    assert [op for op, _ in operations(ews) if op != "GetFolder"] == ["CreateItem"] * 3
    assert len(ews.items("alpha@example.com")) == 3
    assert all(pipeline.target(r.entity_id, account).create_attempted for r in receipts)


@pytest.mark.both_databases
def test_the_create_marker_survives_a_redis_flush(make_pipeline: MakePipeline, ews: EwsControl, redis_url: str) -> None:
    pipeline = make_pipeline(retry_schedule=(60,), traffic_retry_delay=60)  # the next try waits in Redis
    account = mailbox_account(pipeline, ews, "alpha")
    ews.add_fault(operation="CreateItem", after=True, drop=True, times=1)
    receipt = pipeline.submit([account], title="Budget review")
    with pipeline.worker():  # the create lands, its answer is lost, its next try is scheduled in Redis...
        wait_until(lambda: pipeline.outcomes(), what="the first attempt to end")
    client = redis.Redis.from_url(redis_url)
    client.delete(*client.scan_iter(match=f"{pipeline.settings.redis_namespace}:*"))  # ...which then loses it all
    client.close()
    # The target is pending in the database, due when its held try was (TRAFFIC_RETRY_DELAY): the reconciler
    # sends it once that time (plus RETRY_JITTER) has passed.
    later = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=120)
    assert len(reconcile(pipeline.clients, older_than=0, now=later).requeued) == 1
    with pipeline.worker():
        wait_synced(pipeline, {(receipt.entity_id, account): 1})
    assert len(ews.items("alpha@example.com")) == 1  # the marker in the database made the retry look up
    assert [op for op, _ in operations(ews) if op != "GetFolder"] == ["CreateItem", "FindItem", "UpdateItem"]

"""Google end to end: producer → real broker and worker threads → GoogleProvider on googleapiclient → emulator."""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from calsync.core.config.settings import Settings
from calsync.core.store import idempotency
from calsync.core.store.crypto import generate_key
from calsync.providers.google.event_body import SYNC_KEY_PROPERTY, VERSION_PROPERTY, event_id_for
from calsync_emulators.server import RunningEmulator
from tests.integration.provider_support import (
    TENANT,
    add_account,
    cli_json,
    run_cli,
    targets_of,
    wait_synced,
)
from tests.providers.google.gcal_support import Api, Emulator
from tests.support import Pipeline

pytestmark = pytest.mark.integration

MakePipeline = Callable[..., Pipeline]


@pytest.fixture
def emulator(stamped_google_server: RunningEmulator) -> Emulator:
    """The module's Calendar v3 emulator, reset for this test."""
    emu = Emulator(stamped_google_server)
    emu.reset()
    return emu


@pytest.fixture
def make_pipeline(settings_factory: Any, emulator: Emulator) -> Iterator[MakePipeline]:
    """Worker-side runtimes whose Google adapter (built by the provider registry) talks to the emulator."""
    built: list[Pipeline] = []

    def make(**overrides: Any) -> Pipeline:
        settings = settings_factory(
            **{"secret_key": generate_key(), "google_api_endpoint": emulator.api_endpoint, **overrides}
        )
        built.append(Pipeline(settings))
        return built[-1]

    yield make
    for pipeline in built:
        pipeline.close()


@pytest.fixture
def pipeline(make_pipeline: MakePipeline) -> Pipeline:
    """A Google-ready pipeline with the test-scale retry schedule."""
    return make_pipeline()


def google_account(pipeline: Pipeline, emulator: Emulator, name: str, refresh_token: str | None = None) -> str:
    """A user-OAuth account whose calendar is ``{name}@example.com``, its token endpoint the emulator's."""
    creds = emulator.user_credentials(refresh_token)
    return add_account(pipeline, "google", f"{name}@example.com", creds, account_id=f"acc-{name}")


def api_calls(emulator: Emulator, since: int = 0) -> list[tuple[str, int | None]]:
    """(method, status) of Calendar API calls in arrival order, token calls left out."""
    return [(r["method"], r["status"]) for r in emulator.requests()[since:] if r["path"].startswith("/calendar/")]


def token_calls(emulator: Emulator, since: int = 0) -> list[int | None]:
    """Statuses of token-endpoint calls in arrival order."""
    return [r["status"] for r in emulator.requests()[since:] if r["path"] == "/token"]


def private(event: dict[str, Any]) -> dict[str, str]:
    """Our keys on a Calendar event."""
    props: dict[str, str] = event.get("extendedProperties", {}).get("private", {})
    return props


def retry_errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    """Error classes of the job attempts the workers scheduled a retry for, in order."""
    return [
        r.fields["error_class"]  # type: ignore[attr-defined]
        for r in caplog.records
        if r.name == "calsync.jobs" and getattr(r, "fields", {}).get("outcome") == "retry_scheduled"
    ]


def test_an_expired_access_token_is_refreshed_inside_the_job(pipeline: Pipeline, emulator: Emulator) -> None:
    account = google_account(pipeline, emulator, "alice")
    with pipeline.worker():
        first = pipeline.submit([account], title="v1")
        wait_synced(pipeline, {(first.entity_id, account): 1})
        mark = len(emulator.requests())
        emulator.control("POST", "tokens/expire")
        pipeline.submit(None, entity_id=first.entity_id, title="v2")
        wait_synced(pipeline, {(first.entity_id, account): 2})

    # google-auth answers the 401 with a refresh and repeats the call: no failed attempt, no retry.
    assert api_calls(emulator, mark) == [("PUT", 401), ("PUT", 200)]
    assert token_calls(emulator, mark) == [200]
    assert pipeline.outcomes() == {"success": 2}
    [event] = Api(emulator).list_all("alice@example.com")
    assert (event["summary"], event["status"], private(event)[VERSION_PROPERTY]) == ("v2", "confirmed", "2")


def test_a_burst_of_503s_and_a_429_with_retry_after_end_synced_with_one_event(
    make_pipeline: MakePipeline, emulator: Emulator, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="calsync.jobs")
    pipeline = make_pipeline(retry_schedule=(0.1, 0.1, 0.1, 0.1, 0.1), retry_jitter=0.1)
    account = google_account(pipeline, emulator, "alice")
    emulator.fault(path="/events", status=503, times=3)
    emulator.fault(path="/events", status=429, retry_after=1, times=1)

    receipt = pipeline.submit([account], title="Throttled")
    with pipeline.worker():
        wait_synced(pipeline, {(receipt.entity_id, account): 1})
    row = pipeline.target(receipt.entity_id, account)

    inserts = [r for r in emulator.requests() if r["path"].startswith("/calendar/")]
    assert [(r["method"], r["status"]) for r in inserts] == [("POST", 503)] * 3 + [("POST", 429), ("POST", 200)]
    gaps = [later["at"] - earlier["at"] for earlier, later in itertools.pairwise(inserts)]
    # Lower bounds only: the schedule's 0.1 s (± 10 %) after a 503, at least Retry-After (1 s) after the 429.
    assert min(gaps[:3]) >= 0.1 * 0.9 and gaps[3] >= 1.0
    # Each attempt's first 503 is the traffic gate's grace (held, no attempt used: docs/notes/traffic.md); the
    # second is charged, and so is the 429 (a throttle is never excused).
    assert retry_errors(caplog) == ["ProviderUnavailable", "RateLimited"]
    assert pipeline.outcomes() == {"deferred": 2, "retry_scheduled": 2, "success": 1}
    assert row.last_error is None and row.error_class is None
    [event] = Api(emulator).list_all("alice@example.com")
    assert (event["id"], event["summary"]) == (row.external_id, "Throttled")


def test_a_crash_after_insert_before_commit_is_adopted_on_retry_with_exactly_one_event(
    pipeline: Pipeline, emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    account = google_account(pipeline, emulator, "alice")
    real = idempotency.record_success
    crashes: list[int] = []

    def crash_once(*args: Any, **kwargs: Any) -> None:
        if not crashes:
            crashes.append(1)
            raise RuntimeError("worker died between the provider's answer and the commit")
        real(*args, **kwargs)

    monkeypatch.setattr(idempotency, "record_success", crash_once)
    receipt = pipeline.submit([account], title="Exactly once")
    with pipeline.worker():
        wait_synced(pipeline, {(receipt.entity_id, account): 1})

    # The retry's insert collides with its own first attempt (deterministic id) and adopts it; the event
    # already shows the wanted state (times compared as instants), so nothing is written again.
    assert api_calls(emulator) == [("POST", 200), ("POST", 409), ("GET", 200)]
    assert pipeline.outcomes() == {"retry_scheduled": 1, "success": 1}
    row = pipeline.target(receipt.entity_id, account)
    [event] = Api(emulator).list_all("alice@example.com")
    sync_key = f"{TENANT}:{receipt.entity_id}:{account}"
    assert event["id"] == row.external_id == event_id_for(sync_key)
    assert (event["etag"], event["summary"], private(event)[SYNC_KEY_PROPERTY]) == (
        row.external_etag, "Exactly once", sync_key)  # fmt: skip


def test_eight_threads_sync_many_events_to_one_emulator_without_cross_talk(
    pipeline: Pipeline, emulator: Emulator
) -> None:
    names = ["alice", "bob", "carol", "dave"]
    accounts = [google_account(pipeline, emulator, name) for name in names]
    # Some answers come late, so the threads' calls overlap in varying orders (one shared httplib2.Http
    # across threads makes this test fail: responses land in the wrong thread).
    emulator.fault(path="/events", delay_ms=25, probability=0.4)
    latest: dict[str, tuple[int, str, str]] = {}  # entity -> (version, title, description)
    wanted: dict[tuple[str, str], int] = {}
    with pipeline.worker(threads=8):
        entities = []
        for n in range(16):
            mine = [accounts[n % 4], accounts[(n + 1) % 4]]
            receipt = pipeline.submit(mine, title=f"Event {n} v1", description=f"about {n}", location=f"Room {n}")
            entities.append((receipt.entity_id, mine, n))
        for entity, mine, n in entities:
            title, description = f"Event {n} v2", f"about {n}, v2"
            receipt = pipeline.submit(None, entity_id=entity, title=title, description=description, location="Room")
            latest[entity] = (receipt.version, title, description)
            wanted.update({(entity, account): receipt.version for account in mine})
        wait_synced(pipeline, wanted)

    assert {status for _, status in api_calls(emulator)} == {200}
    assert not {"retry_scheduled", "dead_lettered"} & set(pipeline.outcomes())
    rows = {(r.event_id, r.account_id): r for r in targets_of(pipeline, wanted)}
    api = Api(emulator)
    for name, account in zip(names, accounts, strict=True):
        stored = api.list_all(f"{name}@example.com")
        assert len(stored) == 8
        for event in stored:
            tenant, entity, owner = private(event)[SYNC_KEY_PROPERTY].split(":")
            row = rows[entity, owner]
            version, title, description = latest[entity]
            assert (tenant, owner) == (TENANT, account)
            assert (event["summary"], event["description"], private(event)[VERSION_PROPERTY]) == (
                title, description, str(version))  # fmt: skip
            # What the worker recorded is this very event's answer, not another thread's.
            assert (event["id"], event["etag"]) == (row.external_id, row.external_etag)


def test_a_revoked_refresh_token_dead_letters_marks_the_account_and_replay_after_reauth_syncs_once(
    pipeline: Pipeline, emulator: Emulator, tmp_path: Path
) -> None:
    settings: Settings = pipeline.settings
    creds_file = tmp_path / "alice.json"
    creds_file.write_text(json.dumps(emulator.user_credentials("1//alice-original")))
    added = cli_json(settings, "accounts", "add", "--tenant", TENANT, "--provider", "google",
                     "--address", "alice@example.com", "--credentials-file", str(creds_file))  # fmt: skip
    account = added["account_id"]

    with pipeline.worker():
        first = pipeline.submit([account], title="Kick-off v1")
        wait_synced(pipeline, {(first.entity_id, account): 1})
        mark = len(emulator.requests())
        emulator.control("POST", "revoke", {"refresh_token": "1//alice-original"})
        pipeline.submit(None, entity_id=first.entity_id, title="Kick-off v2")
        pipeline.wait_target(first.entity_id, account, "failed")
        # Later jobs of the marked account fail at once, without calling Google.
        second = pipeline.submit([account], title="Retro")
        third = pipeline.submit([account], title="Planning")
        pipeline.wait_target(second.entity_id, account, "failed")
        pipeline.wait_target(third.entity_id, account, "failed")

    # One call with the dead access token, one refused refresh, nothing after that.
    assert api_calls(emulator, mark) == [("PUT", 401)]
    assert token_calls(emulator, mark) == [400]
    assert pipeline.outcomes() == {"success": 1, "dead_lettered": 3}
    records = cli_json(settings, "dlq", "list", "--account", account, "--json")
    assert sorted(r["entity_id"] for r in records) == sorted([first.entity_id, second.entity_id, third.entity_id])
    assert {(r["reason"], r["error_class"], r["attempts"]) for r in records} == {
        ("needs re-authorization", "AuthRevoked", 1)}  # fmt: skip
    [summary] = cli_json(settings, "accounts", "list", "--tenant", TENANT, "--json")
    assert summary["status"] == "needs_reauth"

    refused = run_cli(settings, "dlq", "replay", "--account", account)
    assert refused.exit_code == 0 and json.loads(refused.stdout)["replayed"] == [] and "re-authorize" in refused.stdout

    creds_file.write_text(json.dumps(emulator.user_credentials("1//alice-reauthorized")))
    updated = cli_json(settings, "accounts", "update", account, "--credentials-file", str(creds_file))
    assert updated["status"] == "active"
    mark = len(emulator.requests())
    report = cli_json(settings, "dlq", "replay", "--account", account, "--json")
    assert len(report["replayed"]) == 3 and report["skipped"] == []

    with pipeline.worker():
        wait_synced(pipeline, {(first.entity_id, account): 2, (second.entity_id, account): 1,
                               (third.entity_id, account): 1})  # fmt: skip

    # Exactly once: one update of the synced event (If-Match of its recorded etag), one insert per new event.
    assert sorted(api_calls(emulator, mark)) == [("POST", 200), ("POST", 200), ("PUT", 200)]
    # The new refresh token works (threads starting at once may each fetch an access token).
    assert set(token_calls(emulator, mark)) == {200}
    assert sorted(e["summary"] for e in Api(emulator).list_all("alice@example.com")) == [
        "Kick-off v2", "Planning", "Retro"]  # fmt: skip
    assert cli_json(settings, "dlq", "list", "--account", account, "--json") == []
    again = run_cli(settings, "dlq", "replay", "--account", account)
    assert again.exit_code == 0 and json.loads(again.stdout) == {"replayed": [], "skipped": []}


@pytest.mark.both_databases
def test_a_google_create_writes_no_create_marker(pipeline: Pipeline, emulator: Emulator) -> None:
    # Google deduplicates creates by the event id we choose: the worker never pays the marker's write.
    account = google_account(pipeline, emulator, "alpha")
    receipt = pipeline.submit([account], title="Standup")
    with pipeline.worker():
        wait_synced(pipeline, {(receipt.entity_id, account): 1})
    assert pipeline.target(receipt.entity_id, account).create_attempted is False

"""The chaos run users run themselves (``python -m calsync_emulators.chaos``, issue 33 item 5): a short run passes
on the real command, and each invariant's check catches the violation it names.

The run starts its own Redis master, replica and three sentinels, real ``calsync worker`` processes and works in
a schema of its own in the machine's PostgreSQL, so it needs redis-server and PostgreSQL (CI has both).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import psutil
import psycopg
import pytest
import redis
from hypothesis import given
from hypothesis import strategies as st

from calsync.core.model.calendar import Account, EventState, Target
from calsync.core.model.payload import SYNC_JOB, new_payload
from calsync_emulators.chaos import backends
from calsync_emulators.chaos.__main__ import parse
from calsync_emulators.chaos.backends import EffectLog, MemoryBackend
from calsync_emulators.chaos.invariants import (
    INVARIANTS,
    Accepted,
    Applied,
    Letter,
    Shown,
    TargetId,
    Verdict,
    check,
    converged,
    duplicate_effects,
    incomplete_letters,
    lost_changes,
    regressions,
)
from calsync_emulators.chaos.run import Report
from calsync_emulators.harness.sentinel import redis_server_binary
from calsync_emulators.server import Request
from tests.conftest import POSTGRES_DSN, missing

ROOT = Path(__file__).resolve().parents[2]
T = TargetId("acct-1", "evt-1")


def _leftovers(directory: Path) -> list[str]:
    """Live processes of a run in ``directory``: its Redis processes name it, its workers have it as data dir."""
    found = []
    for process in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if process.status() == psutil.STATUS_ZOMBIE:
                continue
            if str(directory) in " ".join(process.cmdline()) or process.environ().get(
                "CALSYNC_DATA_DIR", ""
            ).startswith(str(directory)):
                found.append(f"{process.pid} {' '.join(process.cmdline())[:200]}")
    return found


def _schemas() -> set[str]:
    with psycopg.connect(POSTGRES_DSN) as conn:
        return {name for (name,) in conn.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE 'chaos%'")}


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.parametrize("provider", ["memory", "google"])
def test_a_short_chaos_run_holds_every_invariant_and_leaves_nothing_behind(
    provider: str, postgres_available: bool, redis_url: str, tmp_path: Path
) -> None:
    """On memory calendars with its own Sentinel topology (the failover); on the Google emulator with a Redis it is
    given, as on staging (no failover, its keys removed)."""
    if redis_server_binary() is None:
        missing("redis", "redis-server (Debian package redis-server) is not on the PATH")
    if not postgres_available:
        missing("postgresql", "not reachable")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CALSYNC_")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "emulators"), env.get("PYTHONPATH", "")])
    given = ["--broker-url", redis_url] if provider == "google" else []
    command = [sys.executable, "-m", "calsync_emulators.chaos", "--provider", provider, "--seconds", "12",
               "--kill-every", "5", "--fault-every", "1.5", "--database-url", POSTGRES_DSN,
               "--directory", str(tmp_path / "run"), *given]  # fmt: skip
    schemas = _schemas()  # before: a schema that was there is not this run's
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=170, check=False)
    print(done.stdout, done.stderr[-3000:])
    assert done.returncode == 0
    assert done.stdout.rstrip().endswith("verdict: PASS: every invariant holds")
    assert [f"HOLDS  {invariant}" in done.stdout for invariant in INVARIANTS] == [True] * len(INVARIANTS)
    for kind in ("provider fault", "worker 0 SIGKILLed", "connections terminated"):
        assert kind in done.stdout  # every kind of trouble happened
    if given:
        assert "skipped: Redis failover: the broker and Redis were given (--broker-url)" in done.stdout
        with redis.Redis.from_url(redis_url) as client:
            assert list(client.scan_iter(match="chaos-*:*", count=1000)) == []
    else:
        assert "Redis master SIGKILLed" in done.stdout
    assert _leftovers(tmp_path) == []
    [own] = re.findall(r"database: its own schema (chaos_\w+), dropped at the end", done.stdout)
    assert own not in schemas and own not in _schemas()  # its own is dropped (another run may be going on beside)


def test_a_target_the_provider_does_not_show_at_its_latest_version_is_a_lost_change() -> None:
    accepted = [Accepted(T, 3, "v3")]
    assert lost_changes(accepted, {T: Shown(T, 3, "v3")}, []) == []
    assert lost_changes(accepted, {T: Shown(T, 2, "v2")}, []) == ["acct-1/evt-1: accepted v3 'v3', the provider "
                                                                   "shows v2 'v2'"]  # fmt: skip
    assert lost_changes(accepted, {T: Shown(T, 3, "other")}, []) != []  # the version, with another title
    assert lost_changes(accepted, {}, []) != []
    letter = Letter(1, "job", SYNC_JOB, T, None, False)
    assert lost_changes(accepted, {}, [letter]) == []  # in the DLQ: an operator's to replay
    assert converged(accepted, {}) != []  # ... but not after the replay


def test_a_second_create_a_version_applied_twice_or_a_second_event_is_a_duplicate_effect() -> None:
    assert duplicate_effects([Applied(T, "created", 1), Applied(T, "updated", 2)], {T: Shown(T, 2, "x")}) == []
    assert duplicate_effects([Applied(T, "created", 1), Applied(T, "created", 2)], {}) == [
        "acct-1/evt-1: created 2 times"
    ]
    assert duplicate_effects([Applied(T, "created", 1), Applied(T, "updated", 1)], {}) == [
        "acct-1/evt-1: version(s) [1] applied more than once"
    ]
    assert duplicate_effects([], {T: Shown(T, 1, "x", copies=2)}) == ["acct-1/evt-1: 2 events at the provider"]
    assert duplicate_effects([Applied(T, "created", 1), Applied(T, "unchanged", 1)], {}) == []  # wrote nothing


def test_an_older_version_applied_after_a_newer_one_is_a_regression() -> None:
    assert regressions([Applied(T, "created", 1), Applied(T, "updated", 3), Applied(T, "updated", 4)]) == []
    assert regressions([Applied(T, "created", 1), Applied(T, "updated", 3), Applied(T, "updated", 2)]) == [
        "acct-1/evt-1: v2 applied after v3 (applied in order: [1, 3, 2])"
    ]


def test_a_dead_letter_without_a_payload_that_parses_or_with_a_cut_body_is_incomplete() -> None:
    payload = new_payload(tenant_id="t", entity_id="evt-1", account_id="acct-1", operation="create", version=1,
                          trace_id="trace").model_dump(mode="json")  # fmt: skip
    assert incomplete_letters([Letter(1, "job", SYNC_JOB, T, payload, False)]) == []
    assert incomplete_letters([Letter(2, "job", SYNC_JOB, T, None, False)]) != []
    assert incomplete_letters([Letter(3, "job", SYNC_JOB, T, {"job_id": "x"}, False)]) != []
    assert incomplete_letters([Letter(4, "quarantined", "", None, None, True)]) == []
    assert incomplete_letters([Letter(5, "quarantined", "", None, None, False)]) != []


def test_the_report_fails_on_any_violation_and_on_an_invariant_left_unchecked() -> None:
    held = check([Accepted(T, 1, "x")], [Applied(T, "created", 1)], {T: Shown(T, 1, "x")}, [])
    held.violations["replay converges"] = []
    assert Report(verdict=held).passed
    assert "verdict: PASS: every invariant holds" in Report(verdict=held).lines()
    broken = Verdict({**held.violations, "no regression": ["acct-1/evt-1: v1 applied after v2"]})
    assert not Report(verdict=broken).passed
    assert "VIOLATED  no regression" in Report(verdict=broken).lines()
    unchecked = Verdict({k: v for k, v in held.violations.items() if k != "replay converges"})
    assert not Report(verdict=unchecked).passed
    assert not Report(verdict=held, error="RuntimeError: workers [0] exited by themselves").passed


@pytest.mark.parametrize("option", ["--seconds", "--kill-every", "--fault-every", "--workers", "--accounts"])
@pytest.mark.parametrize("value", ["0", "-1"])
def test_options_that_cannot_make_a_run_are_refused(option: str, value: str) -> None:
    with pytest.raises(SystemExit) as exit_:
        parse([option, value])
    assert exit_.value.code == 2


@given(st.floats(allow_nan=True, allow_infinity=True) | st.integers())
def test_a_duration_is_taken_exactly_when_it_is_a_finite_number_of_seconds_above_zero(value: float) -> None:
    text = str(value)
    if value > 0 and math.isfinite(value):
        assert parse(["--seconds", text, "--kill-every", text]).seconds == float(text)
        return
    with pytest.raises(SystemExit) as exit_:
        parse(["--seconds", text])
    assert exit_.value.code == 2


@given(st.integers(min_value=-(10**6), max_value=10**6))
def test_a_count_is_taken_exactly_when_it_is_at_least_one(value: int) -> None:
    if value >= 1:
        assert (parse(["--workers", str(value)]).workers, parse(["--latency-ms", str(value)]).latency_ms) == (
            value,
            value,
        )
        return
    with pytest.raises(SystemExit):
        parse(["--workers", str(value)])
    if value < 0:
        with pytest.raises(SystemExit):
            parse(["--latency-ms", str(value)])


def test_the_memory_backend_reports_each_write_what_it_shows_and_when_its_log_is_full(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    backend = MemoryBackend(tmp_path / "memory.sqlite3", latency_ms=0)
    account = Account(id="acct-1", tenant_id="t", provider="memory", address="a@example.com")
    target = Target(event_id="evt-1", account_id="acct-1", tenant_id="t")
    start = dt.datetime(2026, 12, 1, 9, tzinfo=dt.UTC)
    try:
        for version in (1, 2, 2):  # the second v2 changes nothing: no effect
            event = EventState(id="evt-1", tenant_id="t", version=version, title=f"v{version}", start=start,
                               end=start + dt.timedelta(hours=1), time_zone="UTC", all_day=False)  # fmt: skip
            ref = backend.provider.upsert(account, event, target)
            target = dataclasses.replace(target, external_id=ref.external_id)  # as calsync records it
        targets = {target.sync_key: T}
        assert [(w.effect, w.version) for w in backend.applied(targets)] == [("created", 1), ("updated", 2),
                                                                             ("unchanged", 2)]  # fmt: skip
        assert duplicate_effects(backend.applied(targets), {}) == []
        assert backend.shown(targets) == {T: Shown(T, 2, "v2")}
        assert backend.applied({}) == [] and backend.shown({}) == {}  # another run's targets are not this run's
        assert backend.unchecked() == []
        monkeypatch.setattr(backends, "CALL_LOG_LIMIT", 3)
        assert backend.unchecked() != []  # the log may have dropped older calls: the report says so
    finally:
        backend.close()


def _google_write(method: str, path: str, key: str, version: int) -> Request:
    body = {"summary": "x", "extendedProperties": {"private": {"calsyncKey": key, "calsyncVersion": str(version)}}}
    return Request(method, path, {}, {}, json.dumps(body).encode())


def test_the_google_effect_log_counts_inserts_and_updates_not_a_rewrite_of_the_same_version() -> None:
    log = EffectLog()
    events = "/calendar/v3/calendars/a@example.com/events"
    log.record(_google_write("POST", events, "k", 1), 200)
    log.record(_google_write("PUT", f"{events}/id1", "k", 2), 200)
    log.record(_google_write("PUT", f"{events}/id1", "k", 2), 200)  # a retry after a lost answer: no effect
    log.record(_google_write("PUT", f"{events}/id1", "k", 3), 503)  # refused: no effect
    log.record(_google_write("POST", events, "k", 3), None)  # dropped before it was applied
    log.record(_google_write("POST", f"{events}/watch", "k", 3), 200)  # not a write of an event
    log.record(_google_write("PATCH", f"{events}/id1", "k", 1), 200)  # an older version: the regression check's
    assert log.writes == [("k", "created", 1), ("k", "updated", 2), ("k", "updated", 1)]

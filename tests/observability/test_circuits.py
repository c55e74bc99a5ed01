"""Circuit breakers and provider back-off in ``calsync status`` and on the exporter (calsync_circuit_state)."""

from __future__ import annotations

import json
import time

from click.testing import CliRunner
from prometheus_client import generate_latest

from calsync.actors.cli.main import cli
from calsync.core.observability.exporter import exporter_registry
from calsync.core.observability.pipeline_state import StateReader
from calsync.core.traffic import Limits, TrafficStore
from tests.observability.conftest import parse
from tests.support import Pipeline

BREAKER = Limits(concurrency=4, breaker_failures=5, breaker_open=600)


def _fail(traffic: TrafficStore, provider: str, account: str, times: int, ending: str = "failure") -> None:
    for _ in range(times):
        call = traffic.admit(provider, account, "tenant-1", BREAKER, 4)
        assert call.admitted
        traffic.settle(provider, account, call, BREAKER, ending)  # type: ignore[arg-type]


def _since(moment: float) -> float:
    # Seconds since ``moment``, plus the state's millisecond rounding: the block can only have shrunk by that.
    return time.monotonic() - moment + 0.002


def test_an_open_provider_breaker_and_open_account_breakers_show_in_status_and_metrics(pipeline: Pipeline) -> None:
    traffic = TrafficStore(pipeline.clients.redis, pipeline.clients.keys)
    _fail(traffic, "graph", "mailbox-1", 5)  # five in a row: this account's breaker opens
    for n in range(2, 6):  # five accounts (and calls) failing in a row: the provider's opens too
        _fail(traffic, "graph", f"mailbox-{n}", 1)
    _fail(traffic, "google", "calendar-1", 5, "account_failure")  # credentials: only the account's
    call = traffic.admit("exchange", "mailbox-2", "tenant-1", Limits(concurrency=4), 4)
    blocked_at = time.monotonic()
    traffic.settle("exchange", "mailbox-2", call, Limits(concurrency=4), "neutral", ("provider", 300))

    result = CliRunner().invoke(cli, ["status", "--json"], env=pipeline.settings.as_environment())
    assert result.exit_code == 0, result.output
    circuits = {c["provider"]: c for c in json.loads(result.output)["circuits"]}
    assert set(circuits) == {"google", "exchange", "graph"}  # the providers with a breaker (memory has none)
    assert circuits["graph"]["state"] == "open" and circuits["graph"]["accounts_open"] == 1
    assert circuits["google"]["state"] == "closed" and circuits["google"]["some_accounts"] == ["calendar-1"]
    assert 300 - _since(blocked_at) <= circuits["exchange"]["blocked_for_seconds"] <= 300

    table = CliRunner().invoke(cli, ["status"], env=pipeline.settings.as_environment()).output
    assert "circuit breakers" in table and "calendar-1" in table

    page = parse(generate_latest(exporter_registry(StateReader(pipeline.clients))).decode())
    assert page.value("calsync_circuit_state", provider="graph", scope="provider") == 2
    assert page.value("calsync_circuit_state", provider="google", scope="provider") == 0
    assert page.value("calsync_circuit_state", provider="google", scope="account") == 2
    assert page.value("calsync_circuit_accounts_not_closed", provider="google") == 1
    assert 300 - _since(blocked_at) <= page.value("calsync_provider_blocked_seconds", provider="exchange") <= 300

"""Helpers for the pipeline tests against the provider emulators: accounts, the CLI, arrival times, waits."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from click.testing import CliRunner, Result

from calsync.actors.cli.main import cli
from calsync.core.config.settings import Settings
from calsync.core.model.calendar import ProviderName
from calsync.core.store import accounts
from calsync.core.store.targets import TargetRow
from tests.support import Pipeline, logging_kept, wait_until

TENANT = "tenant-1"
_CLI_TUNED_LOGGERS = ("pika", "urllib3", "googleapiclient.discovery_cache", "exchangelib", "alembic")


def add_account(
    pipeline: Pipeline,
    provider: ProviderName,
    address: str,
    credentials: Mapping[str, Any],
    options: Mapping[str, Any] | None = None,
    *,
    account_id: str | None = None,
) -> str:
    """Register an account the way ``calsync accounts add`` does: credentials encrypted at rest."""
    with pipeline.clients.db.write() as conn:
        return accounts.add_account(
            conn,
            tenant_id=TENANT,
            provider=provider,
            address=address,
            credentials=pipeline.clients.cipher.encrypt(credentials),
            options=dict(options or {}),
            account_id=account_id,
        ).id


def run_cli(settings: Settings, *args: str, stdin: str | None = None) -> Result:
    """Run ``calsync ARGS`` in-process with exactly these settings (run it while no worker is logging)."""
    # The CLI calls configure_logging(), which replaces the root handlers with one bound to CliRunner's
    # captured stdout (closed once the command returns): the test process's logging is put back afterwards.
    with logging_kept(*_CLI_TUNED_LOGGERS):
        return CliRunner().invoke(cli, list(args), input=stdin, env=settings.as_environment(), catch_exceptions=False)


def cli_json(settings: Settings, *args: str) -> Any:
    """Run a CLI command that must succeed and return its JSON output."""
    result = run_cli(settings, *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def targets_of(pipeline: Pipeline, pairs: Iterable[tuple[str, str]]) -> list[TargetRow]:
    """The target rows of (entity, account) pairs."""
    return [pipeline.target(entity, account) for entity, account in pairs]


def wait_synced(pipeline: Pipeline, wanted: Mapping[tuple[str, str], int], *, timeout: float = 30) -> None:
    """Wait until every (entity, account) target is synced at exactly its wanted version; fail fast on a failure."""

    def done() -> bool:
        rows = targets_of(pipeline, wanted)
        failed = [r for r in rows if r.status == "failed"]
        assert not failed, f"{len(failed)} target(s) failed, e.g. {failed[0].error_class}: {failed[0].last_error}"
        return all(r.status == "synced" and r.synced_version == wanted[r.event_id, r.account_id] for r in rows)

    wait_until(done, timeout=timeout, what=f"{len(wanted)} targets to be synced at their latest versions")

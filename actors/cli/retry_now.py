"""``calsync retry-now``: pull delayed retries forward once their cause is fixed (Redis broker)."""

from __future__ import annotations

from typing import Any

import click

from calsync.actors.cli.shell import CliState, pass_state, print_json
from calsync.core.model.errors import InvalidChange
from calsync.core.producer import retry_now as delayed_retries


@click.command("retry-now")
@click.option("--tenant", "tenant_id", help="Only this tenant's jobs.")
@click.option("--account", "account_id", help="Only this account's jobs.")
@click.option("--entity", "entity_id", help="Only this event's jobs.")
@click.option("--reason", help='Only jobs whose last failure had this reason or error class, e.g. "rate limited".')
@click.option("--all", "everything", is_flag=True, help="Every delayed job.")
@pass_state
def retry_now(state: CliState, /, **given: Any) -> None:
    """Make delayed retries ready now; idempotency keys stay, so no effect happens twice."""
    selection = delayed_retries.RetrySelection(**given)  # the options are named as its fields
    if selection.is_empty():
        raise InvalidChange("nothing selected: give --account, --entity, --tenant, --reason or --all")
    print_json(delayed_retries.retry_now(state.clients, selection).as_json())

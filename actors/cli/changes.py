"""``calsync submit`` and ``calsync events show``: the producer side from a shell."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import click

from calsync.actors.cli.shell import CliState, exit_if_deferred, pass_state, print_json, read_json_file, stdout, table
from calsync.core.model.change import parse_change
from calsync.core.model.errors import EntityNotFound, InvalidChange
from calsync.core.producer.submit import Producer
from calsync.core.store import events as event_repo
from calsync.core.store import targets as target_repo
from calsync.core.store.targets import TargetRow


@click.command("submit")
@click.option("--tenant", required=True, help="Tenant submitting the change.")
@click.option(
    "--file", "path", type=click.Path(path_type=Path, allow_dash=True), required=True,
    help="Change file (JSON, docs/schemas/change.schema.json); - reads standard input.",
)  # fmt: skip
@click.option("--trace-id", help="Correlation id carried into every job and log line.")
@click.option("--request-id", help="Idempotency key: the same change again under it returns the first receipt.")
@pass_state
def submit(state: CliState, tenant: str, path: Path, trace_id: str | None, request_id: str | None) -> None:
    """Save a change and enqueue its sync jobs; prints {"entity_id", "version", "job_ids", "deferred_accounts"}."""
    change = parse_change(read_json_file(path, "change file"))  # bad input is refused before any connection
    receipt = Producer(state.clients).submit(tenant, change, trace_id=trace_id, request_key=request_id)
    print_json(receipt.as_json())
    exit_if_deferred(receipt.deferred_accounts)


@click.group("events")
def events() -> None:
    """Inspect events and their sync state."""


@events.command("show")
@click.argument("entity_id")
@click.option("--tenant", help="Tenant of the event (needed only when several tenants use the same id).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_state
def show(state: CliState, entity_id: str, tenant: str | None, as_json: bool) -> None:
    """Show an event's version, business status and every target's sync status (a pending one: why it waits, until
    when, and the provider's last error), and when a drift sweep last verified each target and what it found."""
    with state.clients.db.read() as conn:
        if tenant is None:
            tenants = event_repo.find_event_tenants(conn, entity_id)
            if len(tenants) > 1:
                raise InvalidChange(f"event {entity_id} exists for several tenants; pass --tenant")
            tenant = tenants[0] if tenants else ""
        event = event_repo.get_event(conn, tenant, entity_id)
        if event is None:
            raise EntityNotFound(f"event {entity_id} does not exist")
        rows = target_repo.shown_targets(conn, tenant, entity_id)
    if as_json:  # the event as stored, with its targets
        shown = dataclasses.asdict(event)
        when = {"start": event.start.isoformat(), "end": event.end.isoformat()}
        print_json({"entity_id": shown.pop("id"), **shown, **when, "targets": [row.as_json() for row in rows]})
        return
    click.echo(f"{event.id} v{event.version} {event.status}: {event.title}")
    stdout.print(table(
        "targets",
        ["account", "wanted", "sync status", "synced/wanted", "external id", "waits for", "last error"],
        [
            (r.account_id, r.wanted, r.status, f"{r.synced_version}/{r.wanted_version}", r.external_id, _waits(r),
             r.last_error)
            for r in rows
        ],
    ))  # fmt: skip
    verified = [(r.account_id, r.verified_at, r.drift_kind or "as written") for r in rows if r.verified_at]
    if verified:  # a table of its own: the targets' table stays as wide as it was
        stdout.print(table("drift verification", ["account", "verified at", "found"], verified))


def _waits(row: TargetRow) -> str | None:
    """Why a pending target waits, and until when (``calsync events show``'s table)."""
    if row.waiting is None:
        return None
    return f"{row.waiting} until {row.due_at.isoformat(timespec='seconds')}" if row.due_at else row.waiting

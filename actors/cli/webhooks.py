"""``calsync webhooks``: register (the signing secret is printed once), list, disable, enable, remove, rotate-secret."""

from __future__ import annotations

import click

from calsync.actors.cli.shell import CliState, identifier, pass_state, print_json, print_list
from calsync.core.model.vocabulary import WEBHOOK_EVENT_TYPES
from calsync.core.webhooks import Endpoints


def endpoints(state: CliState) -> Endpoints:
    """The webhook endpoints, with the URL rules the settings give (the same as at delivery)."""
    return Endpoints.from_settings(state.clients.db, state.clients.cipher, state.clients.settings)


@click.group("webhooks")
def webhooks() -> None:
    """Signed notifications to a tenant's services (docs/PROTOCOL.md, "Webhooks")."""


@webhooks.command("add")
@click.option("--tenant", required=True, callback=identifier, help="The tenant whose events are notified.")
@click.option("--url", required=True, help="The receiver: https (http only with CALSYNC_WEBHOOK_ALLOW_HTTP).")
@click.option("--events", required=True, help=f"Comma-separated event types: {', '.join(WEBHOOK_EVENT_TYPES)}.")
@pass_state
def add(state: CliState, tenant: str, url: str, events: str) -> None:
    """Register an endpoint and print its signing secret once (stored encrypted only)."""
    secret, endpoint = endpoints(state).add(tenant, url, events.split(","))
    print_json({"secret": secret, **endpoint.as_json()})


@webhooks.command("list")
@click.option("--tenant", help="Only this tenant's endpoints.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_state
def list_(state: CliState, tenant: str | None, as_json: bool) -> None:
    """List endpoints, their status and failure streak (never the secrets)."""
    found = endpoints(state).list(tenant)
    columns = ["id", "tenant", "url", "events", "status", "failures", "since"]
    rows = [(e.id, e.tenant_id, e.url, ",".join(e.event_types),
             e.status if e.status == "enabled" else f"disabled ({e.disabled_by})", e.consecutive_failures,
             e.failing_since) for e in found]  # fmt: skip
    print_list(as_json, found, "webhook endpoints", columns, rows)


@webhooks.command("disable")
@click.argument("endpoint_id")
@click.option("--reason", help="Why (shown by list).")
@pass_state
def disable(state: CliState, endpoint_id: str, reason: str | None) -> None:
    """Stop delivering; pending deliveries go to the DLQ (replay them after enable)."""
    print_json(endpoints(state).disable(endpoint_id, reason=reason).as_json())


@webhooks.command("enable")
@click.argument("endpoint_id")
@pass_state
def enable(state: CliState, endpoint_id: str) -> None:
    """Deliver again, also after the breaker disabled the endpoint; replay its dead letters next."""
    print_json(endpoints(state).enable(endpoint_id).as_json())


@webhooks.command("remove")
@click.argument("endpoint_id")
@pass_state
def remove(state: CliState, endpoint_id: str) -> None:
    """Delete an endpoint and its deliveries."""
    endpoints(state).remove(endpoint_id)
    print_json({"removed": endpoint_id})


@webhooks.command("rotate-secret")
@click.argument("endpoint_id")
@pass_state
def rotate_secret(state: CliState, endpoint_id: str) -> None:
    """Print a new secret once; the old one signs too for CALSYNC_WEBHOOK_SECRET_GRACE seconds."""
    secret, endpoint = endpoints(state).rotate_secret(endpoint_id)
    print_json({"secret": secret, **endpoint.as_json()})

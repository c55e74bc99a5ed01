"""``calsync api-keys``: create (the key is printed once), list (no secrets) and revoke HTTP API keys."""

from __future__ import annotations

import click

from calsync.actors.cli.shell import CliState, identifier, pass_state, print_json, print_list
from calsync.core.model.errors import EntityNotFound
from calsync.core.model.vocabulary import API_SCOPES, ApiScope
from calsync.core.store import api_keys as repo


@click.group("api-keys")
def api_keys() -> None:
    """Per-tenant keys of the HTTP intake (calsync serve), sent as Authorization: Bearer <key>."""


@api_keys.command("create")
@click.option("--tenant", required=True, callback=identifier, help="The tenant the key acts for.")
@click.option("--scope", type=click.Choice(API_SCOPES), required=True,
              help="read: events; submit: also changes; admin: also the dead letters.")  # fmt: skip
@click.option("--name", help="What the key is for (shown by list).")
@pass_state
def create(state: CliState, tenant: str, scope: ApiScope, name: str | None) -> None:
    """Create a key and print {"key", "id"} once: only its hash is stored."""
    with state.clients.db.write() as conn:
        secret, record = repo.create(conn, tenant_id=tenant, scope=scope, name=name)
    print_json({"key": secret, "id": record.id, "tenant_id": tenant, "scope": scope})


@api_keys.command("list")
@click.option("--tenant", help="Only this tenant's keys.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_state
def list_(state: CliState, tenant: str | None, as_json: bool) -> None:
    """List keys with their scope and last use (never the secrets)."""
    with state.clients.db.read() as conn:
        keys = repo.list_keys(conn, tenant)
    columns = ["id", "tenant", "scope", "name", "created", "last used", "revoked"]
    rows = [(k.id, k.tenant_id, k.scope, k.name, k.created_at, k.last_used_at, k.revoked_at) for k in keys]
    print_list(as_json, keys, "api keys", columns, rows)


@api_keys.command("revoke")
@click.argument("key_id")
@pass_state
def revoke(state: CliState, key_id: str) -> None:
    """Revoke a key at once (its next request is 401)."""
    with state.clients.db.write() as conn:
        if not repo.revoke(conn, key_id):
            raise EntityNotFound(f"no live API key {key_id}")
    print_json({"revoked": key_id})

"""``calsync accounts``: register the calendars and mailboxes events are synced into."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from calsync.actors.cli.common import CliState, parse_options, pass_state, print_json, print_table, read_json_file
from calsync.core.model.errors import InvalidChange
from calsync.core.store import accounts as repo


@click.group("accounts")
def accounts() -> None:
    """Manage provider accounts (Google calendars, Exchange mailboxes, memory calendars)."""


def _credentials(state: CliState, path: Path | None) -> bytes | None:
    if path is None:
        return None
    data = read_json_file(path, "credentials file")
    if not isinstance(data, dict):
        raise InvalidChange(f"credentials file {path} must hold a JSON object")
    return state.runtime.cipher.encrypt(data)


@accounts.command("add")
@click.option("--tenant", required=True, help="Tenant that owns the account.")
@click.option("--provider", type=click.Choice(["google", "exchange", "memory"]), required=True)
@click.option("--address", required=True, help="Calendar id or mailbox address.")
@click.option(
    "--credentials-file", type=click.Path(path_type=Path), help="Provider credentials JSON (encrypted at rest)."
)
@click.option("--option", "options", multiple=True, metavar="KEY=VALUE", help="Non-secret provider option; repeatable.")
@click.option("--id", "account_id", help="Choose the account id instead of generating one.")
@pass_state
def add(
    state: CliState,
    tenant: str,
    provider: Any,
    address: str,
    credentials_file: Path | None,
    options: tuple[str, ...],
    account_id: str | None,
) -> None:
    """Register an account; prints {"account_id": ...}."""
    parsed = parse_options(options)
    blob = _credentials(state, credentials_file)
    with state.runtime.db.write() as conn:
        summary = repo.add_account(
            conn, tenant_id=tenant, provider=provider, address=address, credentials=blob, options=parsed,
            account_id=account_id,
        )  # fmt: skip
    print_json({"account_id": summary.id})


@accounts.command("list")
@click.option("--tenant", help="Only this tenant's accounts.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_state
def list_(state: CliState, tenant: str | None, as_json: bool) -> None:
    """List accounts (never their credentials)."""
    with state.runtime.db.read() as conn:
        found = repo.list_accounts(conn, tenant)
    if as_json:
        print_json([a.as_json() for a in found])
        return
    print_table(
        "accounts",
        ["id", "tenant", "provider", "address", "status", "credentials"],
        [(a.id, a.tenant_id, a.provider, a.address, a.status, "yes" if a.has_credentials else "no") for a in found],
    )


@accounts.command("update")
@click.argument("account_id")
@click.option("--credentials-file", type=click.Path(path_type=Path), help="New credentials (re-authorization).")
@click.option("--status", type=click.Choice(["active", "needs_reauth", "disabled"]))
@click.option("--option", "options", multiple=True, metavar="KEY=VALUE", help="Replace the provider options.")
@pass_state
def update(
    state: CliState, account_id: str, credentials_file: Path | None, status: Any, options: tuple[str, ...]
) -> None:
    """Re-authorize (new credentials make the account active again), disable or re-enable an account."""
    blob = _credentials(state, credentials_file)
    if blob is not None and status is None:
        status = "active"
    with state.runtime.db.write() as conn:
        summary = repo.update_account(
            conn, account_id, status=status, credentials=blob, options=parse_options(options) if options else None
        )
    print_json(summary.as_json())

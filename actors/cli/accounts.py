"""``calsync accounts``: register the calendars and mailboxes events are synced into."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any, get_args

import click
from sqlalchemy.exc import IntegrityError

from calsync.actors.cli.shell import (
    CliState,
    KeyValue,
    exit_if_deferred,
    identifier,
    pass_state,
    print_json,
    print_list,
    progress,
    read_json_file,
)
from calsync.core.model.account_rules import calendar_key
from calsync.core.model.calendar import Account, ProviderName, SendUpdates
from calsync.core.model.errors import CalsyncError, EntityNotFound, InvalidChange, PermanentError, ProviderUnavailable
from calsync.core.producer.account_removal import remove_account
from calsync.core.producer.submit import Producer
from calsync.core.store import account_removal
from calsync.core.store import accounts as repo
from calsync.providers.registry import validate_account, verify_account

PROVIDERS = click.Choice(list(get_args(ProviderName)))


@click.group("accounts")
def accounts() -> None:
    """Manage provider accounts (Google calendars, Exchange mailboxes over EWS or Graph, memory calendars)."""


def _read_credentials(path: Path | None) -> dict[str, Any] | None:
    if path is None:
        return None
    data = read_json_file(path, "credentials file")
    if not isinstance(data, dict):
        raise InvalidChange(f"credentials file {path} must hold a JSON object")
    return data


def _validated(account: Account, state: CliState, verify: bool) -> None:
    try:
        validate_account(account)
    except CalsyncError as exc:
        raise InvalidChange(str(exc)) from None
    if not verify:
        return
    try:
        verify_account(account, state.settings)
    except PermanentError as exc:
        raise InvalidChange(f"--verify: {account.provider} refused the credentials, nothing saved: {exc}") from None
    except CalsyncError as exc:
        raise ProviderUnavailable(f"--verify: {account.provider} could not be reached, nothing saved: {exc}") from None


_VERIFY = click.option(
    "--verify", is_flag=True, help="Make one live call with the credentials first (a token; EWS: one GetFolder)."
)


@accounts.command("add")
@click.option("--tenant", required=True, callback=identifier, help="Tenant that owns the account.")
@click.option("--provider", type=PROVIDERS, required=True)
@click.option("--address", required=True, help="Calendar id or mailbox address.")
@click.option(
    "--credentials-file", type=click.Path(path_type=Path), help="Provider credentials JSON (encrypted at rest)."
)
@click.option("--option", "options", type=KeyValue(), multiple=True, help="Non-secret provider option; repeatable.")
@click.option("--id", "account_id", callback=identifier, help="Choose the account id instead of generating one.")
@_VERIFY
@pass_state
def add(
    state: CliState,
    tenant: str,
    provider: Any,
    address: str,
    credentials_file: Path | None,
    options: tuple[tuple[str, Any], ...],
    account_id: str | None,
    verify: bool,
) -> None:
    """Register an account (ids, address, options and credentials checked; --verify: tried live); prints
    {"account_id": ...}. One account per calendar and tenant: a second one for the same mailbox is refused."""
    parsed = dict(options)
    data = _read_credentials(credentials_file)
    _validated(Account(account_id or "new", tenant, provider, address, credentials=data or {}, options=parsed),
               state, verify)  # fmt: skip
    blob = None if data is None else state.clients.cipher.encrypt(data)
    db = state.clients.db
    try:
        with db.write() as conn:
            summary = repo.add_account(
                conn, tenant_id=tenant, provider=provider, address=address, credentials=blob, options=parsed,
                account_id=account_id,
            )  # fmt: skip
    except IntegrityError:
        with db.read() as conn:  # a concurrent registration of the same calendar committed first: name it
            repo.check_calendar_free(conn, tenant, calendar_key(provider, address, parsed))
        if account_id is None:
            raise
        raise InvalidChange(f"account {account_id} already exists") from None  # not the calendar: the id
    print_json({"account_id": summary.id})


@accounts.command("list")
@click.option("--tenant", help="Only this tenant's accounts.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_state
def list_(state: CliState, tenant: str | None, as_json: bool) -> None:
    """List accounts (never their credentials)."""
    with state.clients.db.read() as conn:
        found = repo.list_accounts(conn, tenant)
    columns = ["id", "tenant", "provider", "address", "status", "credentials"]
    rows = [(a.id, a.tenant_id, a.provider, a.address, a.status, "yes" if a.has_credentials else "no") for a in found]
    print_list(as_json, found, "accounts", columns, rows)


@accounts.command("update")
@click.argument("account_id")
@click.option("--credentials-file", type=click.Path(path_type=Path), help="New credentials (re-authorization).")
@click.option("--status", type=click.Choice(["active", "needs_reauth", "disabled"]))
@click.option("--option", "options", type=KeyValue(), multiple=True, help="Replace the provider options.")
@click.option(
    "--provider",
    type=PROVIDERS,
    help="Move the account to another adapter (exchange → graph); clears the options unless --option is given.",
)
@_VERIFY
@pass_state
def update(
    state: CliState,
    account_id: str,
    credentials_file: Path | None,
    status: Any,
    options: tuple[tuple[str, Any], ...],
    provider: Any,
    verify: bool,
) -> None:
    """Re-authorize (new credentials make the account active again), disable, re-enable or move an account."""
    data = _read_credentials(credentials_file)
    parsed = dict(options) if options else None
    with state.clients.db.read() as conn:
        current = repo.load_account(conn, account_id, state.clients.cipher)
    if current is None:
        raise EntityNotFound(f"account {account_id} does not exist")
    if provider is not None and provider != current.provider and parsed is None:
        parsed = {}  # the old adapter's options mean nothing to the new one
    given = {"provider": provider, "credentials": data, "options": parsed}
    changed = {name: value for name, value in given.items() if value is not None}
    if changed or verify:  # the account as it would be stored
        _validated(dataclasses.replace(current, **changed), state, verify)
    blob = None if data is None else state.clients.cipher.encrypt(data)
    if blob is not None and status is None and current.status != "removing":  # a removal goes on, re-authorized
        status = "active"
    with state.clients.db.write() as conn:
        summary = repo.update_account(
            conn, account_id, status=status, credentials=blob, options=parsed, provider=provider
        )
    print_json(summary.as_json())


@accounts.command("remove")
@click.argument("account_id")
@click.option(
    "--detach",
    is_flag=True,
    help="First delete calsync's events from the account's calendar (through the queue: a worker must run).",
)
@click.option(
    "--send-updates",
    type=click.Choice(list(get_args(SendUpdates))),
    help="Whether the deletes notify attendees (default CALSYNC_DEFAULT_SEND_UPDATES, as for a change).",
)
@pass_state
def remove(state: CliState, account_id: str, detach: bool, send_updates: Any) -> None:
    """Remove an account; refused while calsync has events in its calendar, unless --detach deletes them first.

    Prints {"account_id", "status": "removed" | "removing", "detached_events", "job_ids", "deferred_events",
    "targets_left"}: "removing" until the last delete is done (the housekeeping pass then removes it; running
    the command again reports progress). Exit 3 when some deletes were saved but not enqueued (reconcile sends them).
    """
    clients = state.clients
    total = 0
    if detach and sys.stderr.isatty():  # on a terminal: how many events to detach, for the progress bar
        with clients.db.read() as conn:
            total = account_removal.left_in(conn, account_id).to_detach
    with progress("detaching", total) as advance:
        report = remove_account(
            clients.db,
            Producer(clients) if detach else None,
            account_id,
            quiet_seconds=state.settings.delete_verify_delay,
            send_updates=send_updates,
            progress=advance,
        )
    print_json(report.as_json())
    exit_if_deferred(report.deferred_events)

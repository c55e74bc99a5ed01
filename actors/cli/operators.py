"""``calsync operators``: the console's operators (people, not tenants): create (the key is printed once), list,
revoke. Each change is written to the console's audit log as ``cli:<user@host>``."""

from __future__ import annotations

import click

from calsync.actors.cli.shell import CliState, pass_state, print_json, print_list, user_at_host
from calsync.core.model.errors import EntityNotFound
from calsync.core.model.vocabulary import OPERATOR_ROLES, OperatorRole
from calsync.core.store import audit
from calsync.core.store import operators as repo


def _actor() -> str:
    return f"cli:{user_at_host()}"


@click.group("operators")
def operators() -> None:
    """People who use the console at /console (calsync serve): viewers read, operators also act."""


@operators.command("create")
@click.option("--name", required=True, help="Who it is (an email address with --proxy): the audit log's name.")
@click.option("--role", type=click.Choice(OPERATOR_ROLES), required=True,
              help="viewer: reads every page; operator: also replays, discards, pauses, disables.")  # fmt: skip
@click.option("--proxy", is_flag=True, help="Signs in through the trusted proxy only (no key).")
@pass_state
def create(state: CliState, name: str, role: OperatorRole, proxy: bool) -> None:
    """Create an operator and print {"key", "id", "name", "role"} once: only the key's hash is stored."""
    with state.clients.db.write() as conn:
        key, record = repo.create(conn, name=name, role=role, proxy=proxy)
        detail = {"role": role, "proxy": proxy}
        audit.record(conn, actor=_actor(), action="operators.create", subject=f"operator {record.name}", count=1,
                     detail=detail)  # fmt: skip
    print_json({**({"key": key} if key else {}), "id": record.id, "name": record.name, "role": role, "proxy": proxy})


@operators.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_state
def list_(state: CliState, as_json: bool) -> None:
    """List operators with their role (never a key)."""
    with state.clients.db.read() as conn:
        found = repo.list_operators(conn)
    rows = [(o.id, o.name, o.role, o.created_at, o.revoked_at) for o in found]
    print_list(as_json, found, "operators", ["id", "name", "role", "created", "revoked"], rows)


@operators.command("revoke")
@click.argument("name")
@pass_state
def revoke(state: CliState, name: str) -> None:
    """Revoke an operator at once: their key and their open sessions stop working."""
    with state.clients.db.write() as conn:
        if not repo.revoke(conn, name):
            raise EntityNotFound(f"no live operator {name!r}")
        audit.record(conn, actor=_actor(), action="operators.revoke", subject=f"operator {name}", count=1)
    print_json({"revoked": name})

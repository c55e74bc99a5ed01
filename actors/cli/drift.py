"""``calsync drift``: the findings of the drift sweeps (keyset pages) and each tenant's drift policy."""

from __future__ import annotations

import datetime as dt

import click

from calsync.actors.cli.shell import CliState, identifier, pass_state, print_json, print_list, stderr
from calsync.core.drift import store
from calsync.core.model.drift import DRIFT_KINDS, DRIFT_POLICIES, DriftKind, DriftPolicy


@click.group("drift")
def drift() -> None:
    """Drift: what the sweeps found in the calendars against what calsync wrote, and each tenant's policy."""


@drift.command("list")
@click.option("--tenant", callback=identifier, help="Only this tenant's findings.")
@click.option("--kind", type=click.Choice(DRIFT_KINDS), help="Only this kind of finding.")
@click.option("--after", "after_id", type=click.IntRange(0), help="Only findings with an id above this one: the "
              "next page after the last id printed.")  # fmt: skip
@click.option("--limit", type=click.IntRange(1, 10_000), default=1000, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_state
def list_(
    state: CliState, tenant: str | None, kind: DriftKind | None, after_id: int | None, limit: int, as_json: bool
) -> None:
    """List findings, oldest first, one page of --limit; when more follow, stderr names the --after of the next."""
    with state.clients.db.read() as conn:
        found = store.list_findings(conn, tenant_id=tenant, kind=kind, after_id=after_id, limit=limit + 1)
    page = found[:limit]
    columns = ["id", "found at", "tenant", "account", "entity", "external id", "kind", "action"]
    rows = [(f.id, f.found_at, f.tenant_id, f.account_id, f.event_id, f.external_id, f.kind, f.action) for f in page]
    print_list(as_json, page, "drift findings", columns, rows)
    if len(found) > limit:
        stderr.print(f"more findings follow: --after {page[-1].id}", markup=False, highlight=False)


@drift.command("policy")
@click.argument("tenant", callback=identifier)
@click.argument("policy", required=False, type=click.Choice(DRIFT_POLICIES))
@pass_state
def policy(state: CliState, tenant: str, policy: DriftPolicy | None) -> None:
    """Show a tenant's drift policy, or set it (enforce, report, off; report until set).

    Prints {"tenant_id", "policy"}, and when setting also "previous": the policy it replaced.
    """
    if policy is None:
        with state.clients.db.read() as conn:
            print_json({"tenant_id": tenant, "policy": store.policy_of(conn, tenant)})
        return
    with state.clients.db.write() as conn:
        previous = store.policy_of(conn, tenant)
        store.set_policy(conn, tenant, policy, now=dt.datetime.now(dt.UTC))
    print_json({"tenant_id": tenant, "policy": policy, "previous": previous})

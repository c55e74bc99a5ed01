"""One account per calendar and tenant; accounts being removed.

Revision ID: 0008
Revises: 0007

``provider_accounts.calendar_key`` (nullable) names the calendar an account writes into
(core/model/account_rules.py), with a unique index on (tenant_id, calendar_key): two accounts of one tenant
can no longer write into one calendar, not even when registered at the same moment. The status CHECK is
widened by ``removing`` (``calsync accounts remove --detach``). Batch mode: SQLite rebuilds the table.

Existing accounts get their key computed here. When a tenant already has several accounts for one calendar,
the oldest keeps the key and the others get none (NULL: not checked), each named in a warning; remove them
with ``calsync accounts remove ID --detach`` (docs/RUNBOOK.md, "Removing an account").

Expand-only: a nullable column, an index, a wider CHECK. The previous release's code inserts accounts without
a key (not checked against the others) and never writes ``removing``; a worker of it syncs an account being
removed as it always did, which is what finishes the removal. A downgrade turns ``removing`` accounts
``disabled`` (the removal stops where it was).
"""

from __future__ import annotations

import logging

import sqlalchemy as sa
from alembic import op

from calsync.core.model.account_rules import calendar_key

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None
# Every migration says whether the previous revision's code runs on it (docs/DEPLOY.md, "Migrations").
previous_release_compatible = True

log = logging.getLogger(__name__)
_STATUS = "ck_provider_accounts_status"
_INDEX = "uq_provider_accounts_calendar"
_accounts = sa.table(
    "provider_accounts",
    sa.column("id", sa.String),
    sa.column("tenant_id", sa.String),
    sa.column("provider", sa.String),
    sa.column("address", sa.String),
    sa.column("options", sa.JSON),
    sa.column("status", sa.String),
    sa.column("created_at", sa.DateTime),
    sa.column("calendar_key", sa.String),
)


def _status_check(values: tuple[str, ...]) -> str:
    return f"status IN ({', '.join(repr(v) for v in values)})"


def _fill_keys() -> None:
    conn = op.get_bind()
    rows = conn.execute(
        sa.select(_accounts.c.id, _accounts.c.tenant_id, _accounts.c.provider, _accounts.c.address,
                  _accounts.c.options).order_by(_accounts.c.created_at, _accounts.c.id)
    ).all()  # fmt: skip
    holders: dict[tuple[str, str], str] = {}
    for account_id, tenant_id, provider, address, options in rows:
        key = calendar_key(provider, address, options or {})
        if key is None:
            continue
        holder = holders.setdefault((tenant_id, key), account_id)
        if holder != account_id:
            log.warning(
                "accounts %s and %s of tenant %s write into the same calendar (%s): %s is left unchecked; "
                "remove one with `calsync accounts remove ID --detach`",
                holder, account_id, tenant_id, key, account_id,
            )  # fmt: skip
            continue
        conn.execute(sa.update(_accounts).where(_accounts.c.id == account_id).values(calendar_key=key))


def upgrade() -> None:
    with op.batch_alter_table("provider_accounts") as batch:
        batch.add_column(sa.Column("calendar_key", sa.String(1024), nullable=True))
        batch.drop_constraint(_STATUS, type_="check")
        batch.create_check_constraint(_STATUS, _status_check(("active", "needs_reauth", "disabled", "removing")))
    _fill_keys()
    op.create_index(_INDEX, "provider_accounts", ["tenant_id", "calendar_key"], unique=True)


def downgrade() -> None:
    op.drop_index(_INDEX, table_name="provider_accounts")
    op.execute(sa.update(_accounts).where(_accounts.c.status == "removing").values(status="disabled"))
    with op.batch_alter_table("provider_accounts") as batch:
        batch.drop_constraint(_STATUS, type_="check")
        batch.create_check_constraint(_STATUS, _status_check(("active", "needs_reauth", "disabled")))
        batch.drop_column("calendar_key")

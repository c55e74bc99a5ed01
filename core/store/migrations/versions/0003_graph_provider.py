"""Provider ``graph``: Exchange Online mailboxes over Microsoft Graph.

Revision ID: 0003
Revises: 0002

Widens the provider CHECK of ``provider_accounts`` (batch mode: SQLite rebuilds the table). Expand-only:
a worker of the previous release keeps working, it just never sees a ``graph`` account.
"""

from __future__ import annotations

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None
# Every migration says whether the previous revision's code runs on it (docs/DEPLOY.md, "Migrations").
previous_release_compatible = True

_NAME = "ck_provider_accounts_provider"


def _widen(values: tuple[str, ...]) -> None:
    with op.batch_alter_table("provider_accounts") as batch:
        batch.drop_constraint(_NAME, type_="check")
        batch.create_check_constraint(_NAME, f"provider IN ({', '.join(repr(v) for v in values)})")


def upgrade() -> None:
    _widen(("google", "exchange", "graph", "memory"))


def downgrade() -> None:
    _widen(("google", "exchange", "memory"))

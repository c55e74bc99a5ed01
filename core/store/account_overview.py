"""What accounts owe, for the console's accounts page (a keyset page of ``accounts.list_page``: in id order
through the primary key, one tenant's through ``ix_provider_accounts_tenant``).

What an account owes is read for the page's accounts only, each with one range of an index: its outstanding (pending,
failed) targets counted in ``ix_event_targets_account_search`` (``account_id, status, ...``: an index-only count per
status) and its newest open dead letter through ``ix_dead_letters_account``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection
from dataclasses import dataclass

from sqlalchemy import Connection, func, select

from calsync.core.store.schema import dead_letters as d
from calsync.core.store.schema import event_targets as t


@dataclass(frozen=True)
class AccountDebt:
    """An account's outstanding targets and its newest open dead letter's error (None: no open dead letter)."""

    pending: int = 0
    failed: int = 0
    last_error: str | None = None
    last_failed_at: dt.datetime | None = None


def debts(conn: Connection, account_ids: Collection[str]) -> dict[str, AccountDebt]:
    """What each of ``account_ids`` owes, by id (every id present: an account that owes nothing reads as zeros)."""
    ids = list(account_ids)
    if not ids:
        return {}
    pending, failed = (func.count().filter(t.c.status == status) for status in ("pending", "failed"))
    outstanding = t.c.account_id.in_(ids) & t.c.status.in_(("pending", "failed"))
    query = select(t.c.account_id, pending, failed).where(outstanding).group_by(t.c.account_id)
    counts: dict[str, tuple[int, int]] = {row.account_id: (row[1], row[2]) for row in conn.execute(query)}
    newest = select(func.max(d.c.id)).where(d.c.account_id.in_(ids), d.c.status == "open").group_by(d.c.account_id)
    errors = {
        row.account_id: (row.last_error, row.failed_at)
        for row in conn.execute(select(d.c.account_id, d.c.last_error, d.c.failed_at).where(d.c.id.in_(newest)))
    }
    return {account_id: AccountDebt(*counts.get(account_id, (0, 0)), *errors.get(account_id, (None, None)))
            for account_id in ids}  # fmt: skip

"""``calsync accounts remove``: take an account out of service without leaving calsync's events in its calendar.

Without ``detach`` an account with targets left (core/store/account_removal.py: events in its calendar, or
deletes still to run) is refused. With it, the account is marked ``removing`` first: no change may name it any
more (core/producer/submit.py), and the worker deletes rather than writes any of its targets
(core/worker/job.py), so a change that raced the marking cannot put an event back. Then every event that still
wants the account is detached through the intake (:meth:`Intake.detach`): a new version without the account
among its targets, whose job deletes the event there, idempotently, exactly as a change leaving the account
out would. The account row goes once every target is deleted and quiet (``DELETE_VERIFY_DELAY``): at once when
that already holds, else in the housekeeping pass that follows (core/store/pruning.py). Running the command
again reports how far it got, detaches what a race put back, and removes the account when it can.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from calsync.core.model.calendar import SendUpdates
from calsync.core.model.errors import EntityNotFound, InvalidChange
from calsync.core.producer.submit import Intake
from calsync.core.store import account_removal, accounts
from calsync.core.store.database import Database

PAGE = 500  # events read per query while detaching


@dataclass
class RemovalReport:
    """What ``accounts remove`` did and what is left."""

    account_id: str
    status: Literal["removed", "removing"]
    detached_events: int = 0
    job_ids: list[str] = field(default_factory=list)
    deferred_events: list[str] = field(default_factory=list)  # their delete was saved but not enqueued
    targets_left: int = 0

    def as_json(self) -> dict[str, Any]:
        """Printed by ``calsync accounts remove``."""
        return asdict(self)


def remove_account(
    db: Database,
    intake: Intake | None,
    account_id: str,
    *,
    quiet_seconds: float,
    send_updates: SendUpdates | None = None,
    progress: Callable[[int], None],
) -> RemovalReport:
    """Remove the account, or (with an ``intake``: ``--detach``) first delete calsync's events from its calendar.

    Without an intake, an account with targets left is refused (InvalidChange, saying how many and what to do).
    ``progress`` is told each event detached.
    """
    with db.write() as conn:
        account = accounts.get_summary(conn, account_id)
        if account is None:
            raise EntityNotFound(f"account {account_id} does not exist")
        left = account_removal.left_in(conn, account_id)
        if intake is None and left.to_detach and account.status != "removing":
            raise InvalidChange(
                f"account {account_id} still has {left.to_detach} event(s) of calsync's in its calendar "
                f"({left.targets} target(s) not deleted): `calsync accounts remove {account_id} --detach` deletes "
                "them first, through the queue, then removes the account"
            )
        if account.status != "removing":
            accounts.update_account(conn, account_id, status="removing")
    report = RemovalReport(account_id, "removing")
    after: str | None = None
    while intake is not None:
        with db.read() as conn:
            page = account_removal.events_to_detach(conn, account_id, after=after, limit=PAGE)
        for event_id in page:
            receipt = intake.detach(account.tenant_id, event_id, account_id, send_updates=send_updates)
            report.detached_events += bool(receipt.job_ids or receipt.deferred_accounts)
            report.job_ids += receipt.job_ids
            if receipt.deferred_accounts:
                report.deferred_events.append(event_id)
            progress(1)
        if len(page) < PAGE:
            break
        after = page[-1]
    quiet_since = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=quiet_seconds)
    with db.write() as conn:
        if account_removal.remove_if_done(conn, account_id, quiet_since=quiet_since):
            report.status = "removed"
        else:
            report.targets_left = account_removal.left_in(conn, account_id).targets
    return report

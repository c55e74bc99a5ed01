"""Which accounts are swept when: the workers' maintenance pass enqueues the sweeps that are due.

An account is owed sweeps while it is active, its tenant's policy is not ``off`` and its provider can read back
(the adapter implements core/model/drift.py ``DriftReader``; asked only for the providers that have active
accounts, so a worker never loads a client library for nothing). Each pass claims the due accounts, moving their
``next_sweep_at`` one interval forward in the claiming statement (core/drift/store.py ``claim_due``), then enqueues
one ``sweep_account`` message per account on the sweeps' queue. Two workers never enqueue the same account's
sweep for one interval, and a worker that dies between the claim and the enqueue costs that account one interval.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable

import dramatiq
from sqlalchemy import select

from calsync.core.drift import store
from calsync.core.drift.sweep import sweep_message
from calsync.core.model.calendar import ProviderName
from calsync.core.store.database import Database
from calsync.core.store.schema import provider_accounts as a

log = logging.getLogger(__name__)

#: Sweeps one pass enqueues at most; the rest stay due for the next pass.
PASS_LIMIT = 5000


def enqueue_due(
    db: Database,
    broker: dramatiq.Broker,
    queue: str,
    *,
    interval: float,
    reads_back: Callable[[ProviderName], bool],
    now: dt.datetime | None = None,
    limit: int = PASS_LIMIT,
) -> int:
    """Claim the accounts whose sweep is due and enqueue their sweeps on ``queue``; how many were enqueued.

    ``reads_back(provider)``: whether that provider's adapter is a DriftReader.
    """
    with db.read() as conn:  # the providers of the active accounts
        in_use = set(conn.execute(select(a.c.provider).where(a.c.status == "active").distinct()).scalars())
    readers = {name for name in in_use if reads_back(name)}
    if not readers:
        return 0
    now = now or dt.datetime.now(dt.UTC)
    with db.write() as conn:
        claimed = store.claim_due(conn, now=now, interval=interval, providers=readers, limit=limit)
    claim = now + dt.timedelta(seconds=interval)  # the next_sweep_at the claim set
    enqueued = 0
    for account_id in claimed:
        try:
            broker.enqueue(sweep_message(queue, account_id, claim))
        except Exception:
            log.warning("could not enqueue a drift sweep; the account is swept next interval",
                        exc_info=True, extra={"fields": {"account_id": account_id}})  # fmt: skip
            continue
        enqueued += 1
    return enqueued

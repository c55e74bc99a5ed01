"""What a submit answers (:class:`Receipt`), and the one receipt every request under a request key gets.

A request key (an HTTP ``Idempotency-Key``, an intake message's request id) belongs to the request that
claims it in its intent's transaction (core/store/intake_requests.py): on PostgreSQL a concurrent twin's
claim waits for that commit and finds the key taken, on SQLite the writers take turns. The owner enqueues
its jobs after the commit, then stores its receipt. A twin that finds the key claimed before the receipt is
stored waits for it, so every request under the key answers exactly the owner's receipt: the same entity,
version, job ids and deferred accounts (the owner's enqueue takes milliseconds).

A receipt still missing ``OWNER_GRACE`` after the claim belongs to a request that stopped between its commit
and its enqueue (a killed process): its targets stay pending and the reconciler enqueues them. The replay
that finds it stores the receipt the database vouches for: the entity, the version, no job ids, and as
deferred the accounts still pending at that version. Only the first receipt stored counts, so every later
replay, and the owner should it resume, answers that one.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Final

from calsync.core.model.change import Change
from calsync.core.model.errors import IdempotencyKeyReused
from calsync.core.store import intake_requests, targets
from calsync.core.store.database import Database
from calsync.core.store.intake_requests import IntakeRequest

log = logging.getLogger(__name__)

# How long a key's owner may take from its claim to its receipt before a replay completes the receipt for it.
# The owner's steps after its commit (the markers' script call, the enqueue, one update) take milliseconds;
# this leaves room for a broker that answers slowly, and a twin that comes during that time waits for it.
OWNER_GRACE: Final = 30.0
_FIRST_PAUSE: Final = 0.002  # a twin's first wait for the owner's receipt, doubled up to the longest
_LONGEST_PAUSE: Final = 0.1


@dataclass(frozen=True)
class Receipt:
    """What the caller gets back: the event, its new version and the jobs that will sync it."""

    entity_id: str
    version: int
    job_ids: list[str]
    deferred_accounts: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        """The receipt as printed by ``calsync submit`` and stored for a request key (read as ``Receipt(**doc)``)."""
        return asdict(self)


def body_hash(change: Change) -> str:
    """SHA-256 of the canonical change: the same key with a different change is refused."""
    return hashlib.sha256(change.model_dump_json().encode()).hexdigest()


def first_receipt(db: Database, tenant_id: str, request_key: str, digest: str) -> Receipt | None:
    """The receipt of the key's first request, once it is stored; None when the key is free (never used, or expired).

    Raises :class:`IdempotencyKeyReused` when the key was used for another change.
    """
    pause = _FIRST_PAUSE
    while True:
        with db.read() as conn:
            first = intake_requests.find(conn, tenant_id, request_key)
        if first is None:
            return None
        if first.body_hash != digest:
            raise IdempotencyKeyReused(f"Idempotency-Key {request_key!r} was already used for a different change")
        if first.receipt is not None:
            return Receipt(**first.receipt)
        if dt.datetime.now(dt.UTC) - first.created_at >= dt.timedelta(seconds=OWNER_GRACE):
            return _complete(db, tenant_id, request_key, first)
        time.sleep(pause)  # the owner is between its commit and its receipt
        pause = min(2 * pause, _LONGEST_PAUSE)


def store_receipt(db: Database, tenant_id: str, request_key: str, receipt: Receipt) -> Receipt:
    """Store the owner's receipt; returns the key's receipt: this one, unless a replay completed it first."""
    with db.write() as conn:
        stored = intake_requests.store_receipt(conn, tenant_id, request_key, receipt.as_json())
    return receipt if stored is None else Receipt(**stored)


def _complete(db: Database, tenant_id: str, request_key: str, first: IntakeRequest) -> Receipt:
    with db.write() as conn:
        pending = [row.account_id for row in targets.list_targets(conn, tenant_id, first.entity_id)
                   if row.status == "pending" and row.wanted_version == first.version]  # fmt: skip
        doc = Receipt(first.entity_id, first.version, [], pending).as_json()
        stored = intake_requests.store_receipt(conn, tenant_id, request_key, doc)
    if stored in (None, doc):
        log.warning(
            "the first request under a request key stored no receipt; its targets are left to the reconciler",
            extra={"fields": {"tenant_id": tenant_id, "request_key": request_key, **doc}},
        )
    return Receipt(**(stored or doc))

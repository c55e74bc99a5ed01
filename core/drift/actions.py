"""What a sweep does about its findings, per the tenant's policy (issue 34 item 3).

- ``report``: each finding recorded with action ``reported``, its target's ``drift_kind`` set, and an
  ``event.drifted`` notification written to the webhook outbox in the same transaction; nothing else changes.
- ``enforce``: a deleted, missing or modified target goes back to ``pending`` (the provider id and etag forgotten when
  the item is gone) in the finding's transaction, and a repair sync of the version it has is enqueued after the
  commit: the normal sync job under the target's lock, as a repair (it runs although the version is synced) with an
  idempotency key of its own (the finding's id), so neither the stale-version rule nor an earlier job's record
  swallows it. A repair whose enqueue fails leaves the target pending without a due time: the reconciler enqueues it.
  An unknown item (an orphan or a duplicate calsync made) is deleted through the adapter before the transaction
  (:func:`delete_orphans`; already gone is success). Each finding is recorded with action ``repaired``.
  A target that changed since it was compared is left alone: no finding, the work in flight wins.

``off`` accounts are never swept (core/drift/schedule.py), so no finding ever meets it.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

import dramatiq
from sqlalchemy import Connection

from calsync.core.drift import store
from calsync.core.drift.compare import Believed, Comparison, Drift, marked_event
from calsync.core.drift.store import Finding
from calsync.core.messaging.messages import REPAIR_OPTION, sync_message
from calsync.core.model.calendar import Account, Provider, Target
from calsync.core.model.drift import DriftAction, DriftPolicy
from calsync.core.model.ids import new_trace_id
from calsync.core.model.payload import JobPayload, idempotency_key, new_payload
from calsync.core.model.provider_io import RequestsSent
from calsync.core.store import targets
from calsync.core.store.database import Database
from calsync.core.store.targets import TargetKey
from calsync.core.traffic import TrafficGate
from calsync.core.webhooks import Outbox

log = logging.getLogger(__name__)


@dataclass
class Settled:
    """What the findings' transaction recorded, and what goes out after its commit."""

    findings: list[Finding] = field(default_factory=list)
    repairs: list[JobPayload] = field(default_factory=list)
    notified: list[str] = field(default_factory=list)


def delete_orphans(
    provider: Provider, account: Account, drifts: Sequence[Drift], traffic: TrafficGate, sent: RequestsSent
) -> None:
    """Enforce: delete each unknown item through the adapter, each call under the traffic gate (a failure raises:
    the sweep is retried and finds what is left)."""
    for drift in drifts:
        if drift.kind != "unknown_item":
            continue
        orphan = Target(event_id=_event_of(drift) or "", account_id=account.id, tenant_id=account.tenant_id,
                        external_id=drift.external_id, etag=drift.item.etag if drift.item else None)  # fmt: skip
        with traffic.call(account, None, sent):
            provider.delete(account, orphan)


def record(
    conn: Connection,
    account: Account,
    comparison: Comparison,
    policy: DriftPolicy,
    *,
    outbox: Outbox | None,
    now: dt.datetime,
) -> Settled:
    """Record the comparison in ``conn``'s transaction: findings per ``policy``, the verified targets, the
    notifications (report) and the targets reopened for repair (enforce)."""
    settled = Settled()
    store.mark_verified(conn, [(_key(t), None) for t in comparison.verified], now=now)
    action: DriftAction = "repaired" if policy == "enforce" else "reported"
    for drift in comparison.drifts:
        target = drift.target
        if policy == "enforce" and target is not None and not _reopen(conn, target, drift, now):
            continue  # the target changed since it was compared: work in flight, not drift
        (finding,) = store.record_findings(conn, [_finding(account, drift, action, now)])
        settled.findings.append(finding)
        if policy == "enforce" and target is not None:
            settled.repairs.append(_repair(target, finding))
        elif policy == "report":
            if target is not None:
                store.mark_verified(conn, [(_key(target), drift.kind)], now=now)
            if outbox is not None:
                version = target.synced_version if target is not None else None
                settled.notified += outbox.on_drifted(conn, finding_id=finding.id, tenant_id=account.tenant_id,
                                                      account_id=account.id, event_id=finding.event_id,
                                                      external_id=drift.external_id, kind=drift.kind,
                                                      version=version)  # fmt: skip
    return settled


def send(db: Database, broker: dramatiq.Broker, queue: str, settled: Settled, outbox: Outbox | None) -> None:
    """After the commit: the repairs to the sync queue (a failed enqueue is left to the reconciler), the
    notifications to their dispatch."""
    for payload in settled.repairs:
        try:
            broker.enqueue(sync_message(queue, payload, options={REPAIR_OPTION: True}))
        except Exception:
            log.exception("could not enqueue a drift repair; the reconciler will", extra={"fields": {
                "entity_id": payload.entity_id, "account_id": payload.account_id}})  # fmt: skip
            with db.write() as conn:
                targets.mark_unqueued(conn, TargetKey(payload.tenant_id, payload.entity_id, payload.account_id))
    if settled.notified and outbox is not None:
        outbox.send(broker, settled.notified)


def _key(target: Believed) -> TargetKey:
    return TargetKey(target.tenant_id, target.event_id, target.account_id)


def _event_of(drift: Drift) -> str | None:
    # The event of the drift: its target's, else the one its item's marker names.
    return drift.target.event_id if drift.target is not None else marked_event(drift.item)


def _finding(account: Account, drift: Drift, action: DriftAction, now: dt.datetime) -> Finding:
    return Finding(0, account.tenant_id, account.id, _event_of(drift), drift.external_id, drift.kind, action, now)


def _reopen(conn: Connection, target: Believed, drift: Drift, now: dt.datetime) -> bool:
    return store.reopen_for_repair(conn, _key(target), external_id=drift.external_id, version=target.synced_version,
                                   kind=drift.kind, forget_ref=drift.kind != "modified_externally",
                                   now=now)  # fmt: skip


def _repair(target: Believed, finding: Finding) -> JobPayload:
    # The version the target has, asserted again under a key of its own: the finding's.
    version = target.synced_version
    key = (
        f"{idempotency_key(target.tenant_id, target.event_id, target.account_id, 'update', version)}:drift:{finding.id}"
    )
    return new_payload(tenant_id=target.tenant_id, entity_id=target.event_id, account_id=target.account_id,
                       operation="update", version=version, trace_id=new_trace_id(), key=key)  # fmt: skip

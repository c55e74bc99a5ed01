"""The reconciler: the guarantee that an accepted change is never lost.

Every accepted change leaves its targets ``pending`` with a due time. A pending target overdue by
more than ``RECONCILE_AFTER`` seconds has no live message (the broker lost it, a worker was killed,
or Redis was flushed), so a fresh job for the event's latest version is enqueued. A target whose
enqueue failed has no due time at all (``targets.mark_unqueued``): it is due at once, and the very
next pass re-enqueues it.
A pending target whose version is synced already was put back by a drift repair (core/drift/actions.py): its
job is re-enqueued as a repair, under a key of its own, or the version's spent key would swallow it.
Duplicates are harmless: jobs are idempotent. The same pass re-enqueues lost webhook dispatches and
deliveries (core/webhooks/outbox.py) and runs one housekeeping pass (core/store/pruning.py).

Workers run the re-enqueueing part (:func:`requeue_lost`) in their housekeeping pass, every
``MAINTENANCE_INTERVAL`` under its lease (core/worker/maintenance.py): so a target whose enqueue failed
(``deferred_accounts``: the broker was down, or not started yet) is enqueued within seconds of the broker
answering again, with no CronJob (the embedded default has none) and no manual ``calsync reconcile``.
The CronJob and the command remain for deployments whose workers run no pass (``MAINTENANCE_INTERVAL=0``).
"""

from __future__ import annotations

import datetime as dt
import logging
from collections import Counter
from dataclasses import dataclass, field

from calsync.core.clients import Clients
from calsync.core.messaging.lanes import lanes_of
from calsync.core.messaging.messages import rerun_message, sync_message
from calsync.core.model.calendar import EventState
from calsync.core.model.ids import new_trace_id
from calsync.core.model.payload import JobPayload
from calsync.core.model.planner import plan
from calsync.core.model.vocabulary import PRUNED_TABLES
from calsync.core.producer.fairness import lane_choice
from calsync.core.store import events, targets
from calsync.core.store.pruning import PruneReport, Retention, prune
from calsync.core.store.targets import TargetRow
from calsync.core.webhooks import reconcile_webhooks

log = logging.getLogger(__name__)

PASS_LIMIT = 1000  # overdue targets, and lost webhook dispatches and deliveries, re-enqueued per pass
_PURGED_AS = {"intake_requests": "request_keys", "provider_accounts": "accounts"}  # the report's names of two tables


@dataclass
class ReconcileReport:
    """What one reconciliation pass did."""

    requeued: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    purged: PruneReport = field(default_factory=PruneReport)
    webhooks_requeued: int = 0

    @property
    def enqueued(self) -> int:
        """Jobs enqueued again: sync jobs and webhook work."""
        return len(self.requeued) + self.webhooks_requeued

    def as_json(self) -> dict[str, object]:
        """Printed by ``calsync reconcile``."""
        purged = self.purged.purged
        return {
            "requeued": len(self.requeued),
            "job_ids": self.requeued,
            "enqueue_failures": len(self.failed),
            **{f"purged_{_PURGED_AS.get(table, table)}": purged.get(table, 0) for table in PRUNED_TABLES},
            "housekeeping_caught_up": self.purged.caught_up,
            "webhooks_requeued": self.webhooks_requeued,
        }


def lost_job(row: TargetRow, event: EventState, trace_id: str) -> JobPayload:
    """The job of a target whose jobs are presumed lost: the event's latest version (or the target's, when a drift
    repair put it ahead), the create key reused unless a sync already spent it."""
    return plan(row, row.key, version=max(event.version, row.wanted_version), wanted_present=row.wanted == "present",
                cancelled=event.status == "cancelled", trace_id=trace_id, earlier_jobs_lost=True)  # fmt: skip


def reconcile(clients: Clients, *, older_than: float | None = None, now: dt.datetime | None = None) -> ReconcileReport:
    """Re-enqueue overdue pending targets and lost webhook work, then run one housekeeping pass."""
    now = now or dt.datetime.now(dt.UTC)
    trace = new_trace_id()
    report = requeue_lost(clients, older_than=older_than, now=now, trace=trace)
    report.purged = prune(clients.db, Retention.of(clients.settings), now=now)
    log.info("reconciliation done", extra={"fields": report.as_json() | {"job_ids": None, "trace_id": trace}})
    return report


def requeue_lost(
    clients: Clients,
    *,
    older_than: float | None = None,
    now: dt.datetime | None = None,
    trace: str | None = None,
) -> ReconcileReport:
    """Re-enqueue overdue pending targets (those whose enqueue failed at once) and lost webhook work."""
    threshold = clients.settings.reconcile_after if older_than is None else older_than
    before = (now or dt.datetime.now(dt.UTC)) - dt.timedelta(seconds=threshold)
    report = ReconcileReport()
    trace = trace or new_trace_id()
    with clients.db.read() as conn:
        overdue = targets.overdue(conn, before=before, limit=PASS_LIMIT)
        states = {(row.tenant_id, row.event_id): events.get_event(conn, row.tenant_id, row.event_id) for row in overdue}
    # A tenant with many lost jobs re-enters on the bulk lane past its rate, as a flood of new ones would.
    choice, queues = lane_choice(clients), lanes_of(clients.settings)
    lanes = {tenant: iter(choice.lanes(tenant, n)) for tenant, n in Counter(r.tenant_id for r in overdue).items()}
    for row in overdue:
        event = states[(row.tenant_id, row.event_id)]
        if event is None:
            continue
        payload = lost_job(row, event, trace)
        queue = queues.queue(next(lanes[row.tenant_id]))
        message = sync_message(queue, payload)
        if row.synced_version >= row.wanted_version:  # a drift repair's re-assertion of a version already synced
            message = rerun_message(queue, payload, payload.operation, payload.target_version,
                                    f"{payload.idempotency_key}:reassert:{payload.job_id}")  # fmt: skip
        try:
            clients.broker.enqueue(message)
        except Exception:
            log.exception("reconciler could not enqueue", extra={"fields": {"entity_id": row.event_id}})
            report.failed.append(payload.job_id)
            with clients.db.write() as conn:
                targets.mark_unqueued(conn, row.key)
            continue
        with clients.db.write() as conn:
            # the job id enqueued (a re-assertion's is its own), so GET /v1/jobs/{job_id} finds it
            targets.postpone(conn, row.key, due_at=dt.datetime.now(dt.UTC), job_id=message.args[0]["job_id"])
        report.requeued.append(payload.job_id)
    report.webhooks_requeued = reconcile_webhooks(
        clients.db, clients.broker, clients.settings.webhook_queue, before=before, limit=PASS_LIMIT
    )
    return report

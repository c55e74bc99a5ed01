"""Housekeeping in workers: every worker process offers to run the pass, one runs it per interval.

Each worker process starts a thread that, every ``MAINTENANCE_INTERVAL`` seconds, tries to take the
deployment's maintenance lease (``SET NX PX``, key in core/redis/keys.py, TTL the interval). The one
that gets it runs one bounded pass (core/store/pruning.py) with a time budget of most of the interval;
the others do nothing. The lease is never released: it expires, so passes are spaced by the interval
however many workers run, and a pass that dies with its worker blocks the next one for one interval at
most. So the deployment deletes up to ``maintenance_batch`` x ``maintenance_max_batches`` (internal settings:
100,000) rows of each table per interval (docs/RUNBOOK.md §Housekeeping says how to size it against the job rate).

A pass first re-enqueues what the broker lost, when the composition root gives it that part of the
reconciler (``requeue``, core/producer/reconcile.py ``requeue_lost``): pending targets overdue by
``RECONCILE_AFTER`` and those whose enqueue failed (no due time). So changes accepted while the broker was
down, or before it was started, are enqueued within one interval of it answering, with no CronJob.
Next it enqueues the drift sweeps that are due when the composition root gives it that part
(``sweeps``, core/drift/schedule.py ``enqueue_due``): sweeps are claimed per account in the database, so the
lease is not what keeps two workers from enqueueing one account's sweep.
An unreachable Redis is reported to the worker's :class:`~core.messaging.outage.RedisOutage` (``watch``),
which says it once, instead of a warning with a traceback every interval.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field

import dramatiq
import redis
from prometheus_client import Counter, Histogram

from calsync.core.messaging.outage import RedisWatch
from calsync.core.model.vocabulary import MAINTENANCE_RESULTS, PRUNED_TABLES, MaintenanceResult
from calsync.core.redis.keys import RedisKeys
from calsync.core.redis.periodic import start_repeating
from calsync.core.store.database import Database
from calsync.core.store.pruning import PruneReport, Retention, prune
from calsync.core.worker.metrics import worker_id, zeros

log = logging.getLogger(__name__)

#: Share of the interval a pass may spend starting new batches (the rest is slack before the next lease).
BUDGET_SHARE = 0.8

ROWS_PURGED = Counter(
    "calsync_housekeeping_rows_purged_total",
    "Rows deleted by housekeeping passes in workers, by table.",
    ["table"],
)
PASSES = Counter(
    "calsync_housekeeping_passes_total",
    "Housekeeping passes run by this worker process: caught_up (everything due went), behind (more was due "
    "than one pass may delete), failed.",
    ["result"],
)
PASS_DURATION = Histogram(
    "calsync_housekeeping_pass_duration_seconds",
    "Duration of the housekeeping passes this worker process ran.",
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
)


@dataclass(eq=False)  # a middleware is compared by identity
class Maintenance(dramatiq.Middleware):
    """Runs the maintenance thread of one worker process."""

    db: Database
    client: redis.Redis
    keys: RedisKeys
    _: KW_ONLY
    interval: float
    retention: Retention
    watch: RedisWatch
    requeue: Callable[[], int]  # re-enqueues what the broker lost; how many jobs
    sweeps: Callable[[], int] | None = None  # enqueues the drift sweeps that are due; how many (None: none)
    _stop: threading.Event = field(default_factory=threading.Event, init=False)
    _thread: threading.Thread | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        zeros(ROWS_PURGED, PRUNED_TABLES)  # every series exists from the start, at 0
        zeros(PASSES, MAINTENANCE_RESULTS)

    def after_worker_boot(self, broker: dramatiq.Broker, worker: dramatiq.Worker) -> None:
        self._stop.clear()
        failure = "housekeeping pass failed; trying again next interval"
        self._thread = start_repeating(
            "calsync-maintenance", self._stop, self.interval, self.run_once, log=log, failure=failure
        )

    def after_worker_shutdown(self, broker: dramatiq.Broker, worker: dramatiq.Worker) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.interval + 5)
            self._thread = None

    def take_lease(self) -> bool:
        """Whether this process runs the pass of this interval (no other process took it)."""
        token = f"{worker_id()}|{uuid.uuid4().hex}"
        lease = self.keys.maintenance_lease()
        try:
            taken = bool(self.client.set(lease, token, nx=True, px=max(1, int(self.interval * 1000))))
        except redis.ConnectionError as exc:
            self.watch.lost(exc)  # said once for the outage, by whichever thread found it first
            return False
        self.watch.answered()
        return taken

    def run_once(self) -> PruneReport | None:
        """One pass if this process holds the interval's lease; None when another process has it."""
        if not self.take_lease():
            return None
        started = time.monotonic()
        with PASS_DURATION.time(), PASSES.labels("failed").count_exceptions():
            requeued = self.requeue()
            swept = self.sweeps() if self.sweeps is not None else 0
            report = prune(self.db, self.retention, budget_seconds=self.interval * BUDGET_SHARE)
        result: MaintenanceResult = "caught_up" if report.caught_up else "behind"
        PASSES.labels(result).inc()
        for table, rows in report.purged.items():
            ROWS_PURGED.labels(table).inc(rows)
        if report.purged.total() or requeued or swept or not report.caught_up:
            fields: dict[str, object] = {"result": result, "seconds": round(time.monotonic() - started, 3)}
            fields.update({str(table): rows for table, rows in report.purged.items()})
            if requeued:
                fields["requeued"] = requeued
            if swept:
                fields["sweeps_enqueued"] = swept
            (log.info if report.caught_up else log.warning)("housekeeping pass done", extra={"fields": fields})
        return report

"""Stale-version skipping: an old job never overwrites a newer version.

Runs under the lock. A job is stale when the event has moved past the job's target version (a job
for the newer version exists) or the target already synced that version. The state it looks at is
the delivery's one read (:func:`core.worker.snapshot.job_snapshot`), which the actor then uses too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import dramatiq

from calsync.core.model.vocabulary import Outcome
from calsync.core.worker.context import JobContext, JobMiddleware, job_snapshot, skip

if TYPE_CHECKING:
    from calsync.core.runtime import Runtime


class StaleVersionSkip(JobMiddleware):
    """Skips jobs whose target version is no longer the one to sync."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def before_job(self, broker: dramatiq.Broker, message: dramatiq.MessageProxy, ctx: JobContext) -> None:
        assert ctx.payload is not None
        snapshot = job_snapshot(self.runtime, ctx)
        if snapshot.event is None or snapshot.target is None:
            return  # the actor raises EntityNotFound with the details
        wanted = ctx.payload.target_version
        if snapshot.event.version > wanted:
            raise skip(ctx, Outcome.STALE)
        if snapshot.target.synced_version >= wanted and not message.options.get("repair"):
            raise skip(ctx, Outcome.STALE)

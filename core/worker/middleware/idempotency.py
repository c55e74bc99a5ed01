"""Idempotency: a job whose logical effect is already recorded as done is acked without any call.

Runs under the target's lock, so a duplicate delivery waiting for the lock sees the record its twin
committed. The record is read with the rest of the job's state, in the same statement
(:func:`core.worker.snapshot.job_snapshot`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import dramatiq

from calsync.core.model.vocabulary import Outcome
from calsync.core.worker.context import JobContext, JobMiddleware, job_snapshot, skip

if TYPE_CHECKING:
    from calsync.core.runtime import Runtime


class IdempotencyGuard(JobMiddleware):
    """Checks the idempotency record written in the same transaction as the sync result."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def before_job(self, broker: dramatiq.Broker, message: dramatiq.MessageProxy, ctx: JobContext) -> None:
        if job_snapshot(self.runtime, ctx).already_done:
            raise skip(ctx, Outcome.ALREADY_DONE)

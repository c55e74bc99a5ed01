"""Idempotency: a job whose logical effect is already recorded as done is acked without any call."""

from __future__ import annotations

import dramatiq

from core.middleware.context import JobContext, JobMiddleware, skip
from core.store import idempotency
from core.store.database import Database


class IdempotencyGuard(JobMiddleware):
    """Checks the idempotency record written in the same transaction as the sync result."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def before_job(self, broker: dramatiq.Broker, message: dramatiq.MessageProxy, ctx: JobContext) -> None:
        assert ctx.payload is not None
        with self.db.read() as conn:
            done = idempotency.succeeded(conn, ctx.payload.idempotency_key)
        if done:
            raise skip(ctx, "already_done")

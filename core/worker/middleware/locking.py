"""Per-target lock: one worker at a time syncs a (tenant, entity, account).

A busy lock does not burn the failure budget: the message is re-enqueued with a short jittered delay
(``LOCK_RETRY_DELAY``) and this delivery is skipped. After ``LOCK_MAX_WAITS`` such waits the job
fails with LockBusy and goes through the normal retry schedule, so a stuck lock cannot loop forever.
The lock is released in both after-hooks, only by the delivery that took it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

import dramatiq

from calsync.core.config.settings import Settings
from calsync.core.messaging.messages import redelivery
from calsync.core.model.backoff import jittered
from calsync.core.model.errors import LockBusy
from calsync.core.model.vocabulary import Outcome
from calsync.core.redis.keys import RedisKeys
from calsync.core.redis.locks import LockManager
from calsync.core.worker.context import JobContext, JobMiddleware, MiddlewareFailure, current_job, skip

LockObserver = Callable[[str], None]


class ResourceLocking(JobMiddleware):
    """Takes the target's lock before the job and frees it after, whatever happened."""

    def __init__(
        self, locks: LockManager, keys: RedisKeys, settings: Settings, on_attempt: LockObserver | None = None
    ) -> None:
        self.locks = locks
        self.keys = keys
        self.settings = settings
        self.on_attempt = on_attempt

    def before_job(self, broker: dramatiq.Broker, message: dramatiq.MessageProxy, ctx: JobContext) -> None:
        assert ctx.payload is not None
        p = ctx.payload
        held = self.locks.acquire(self.keys.lock(p.tenant_id, p.entity_id, p.account_id))
        if self.on_attempt is not None:
            self.on_attempt("acquired" if held else "busy")
        if held is not None:
            ctx.lock = held
            return
        waits = int(message.options.get("lock_waits", 0))
        if waits >= self.settings.lock_max_waits:
            raise MiddlewareFailure(LockBusy(f"lock still busy after {waits} waits"))
        delay = jittered(self.settings.lock_retry_delay, self.settings.retry_jitter)
        later = p.model_copy(update={"scheduled_at": dt.datetime.now(dt.UTC) + dt.timedelta(seconds=delay)})
        broker.enqueue(
            redelivery(message, args=[later.to_message_arg()], options={"lock_waits": waits + 1}),
            delay=int(delay * 1000),
        )
        ctx.retry_in = delay
        raise skip(ctx, Outcome.LOCK_BUSY)

    def _release(self) -> None:
        ctx = current_job()
        if ctx is not None and ctx.lock is not None:
            held, ctx.lock = ctx.lock, None
            self.locks.release(held)

    def after_process_message(
        self,
        broker: dramatiq.Broker,
        message: dramatiq.MessageProxy,
        *,
        result: object = None,
        exception: BaseException | None = None,
    ) -> None:
        self._release()

    def after_skip_message(self, broker: dramatiq.Broker, message: dramatiq.MessageProxy) -> None:
        self._release()

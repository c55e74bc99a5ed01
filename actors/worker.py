"""A worker process's parts, assembled: runtime, provider adapters, the broker with its middleware, the actors."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import dramatiq

from calsync.actors.declare import declare
from calsync.actors.shutdown import CloseOnShutdown
from calsync.core.config.settings import Settings
from calsync.core.model.calendar import Provider
from calsync.core.model.errors import ConfigurationError
from calsync.core.producer.reconcile import requeue_lost
from calsync.core.redis.limiter import RedisLimiter
from calsync.core.runtime import Runtime
from calsync.core.store.key_rotation import require_secret_key
from calsync.core.store.rotated_credentials import StoredCredentials
from calsync.core.webhooks import Outbox
from calsync.core.worker.stack import observed_worker_middleware
from calsync.providers.registry import ProviderRegistry


@dataclass
class Worker:
    """What one worker process runs on; ``close`` releases it (tests, benchmarks)."""

    runtime: Runtime
    providers: ProviderRegistry
    broker: dramatiq.Broker
    actors: dict[str, dramatiq.Actor[Any, Any]]

    def close(self) -> None:
        """Release the adapters' connections, then the runtime's."""
        self.providers.close()
        self.runtime.close()


def mailbox_limiter(runtime: Runtime) -> RedisLimiter:
    """Per-mailbox slots shared by every worker on this Redis; a lease outlives one provider call.

    Its commands go on the worker threads' lock connections (closed with the lock manager), as traffic
    control's do (actors/declare.py): a job's Redis commands share one connection per thread.
    """
    settings = runtime.settings
    return RedisLimiter(
        runtime.redis,
        runtime.keys,
        limit=settings.graph_mailbox_concurrency,
        lease=settings.provider_timeout * 3 + 5,
        wait=settings.graph_slot_wait,
        connections=runtime.locks.connections,
    )


def build_worker(settings: Settings, *, providers: Mapping[str, Provider] | None = None) -> Worker:
    """The worker of this process: the observed middleware stack, the adapters (``providers`` overrides some).

    The adapters are closed when Dramatiq shuts the worker down, and again (harmlessly) by ``Worker.close``.
    """

    def middleware(runtime: Runtime) -> list[dramatiq.Middleware]:
        def requeue() -> int:  # in every housekeeping pass: the CronJob's re-enqueueing, with no CronJob needed
            return requeue_lost(runtime).enqueued

        return [*observed_worker_middleware(runtime, outbox, requeue=requeue), CloseOnShutdown(registry.close)]

    runtime = Runtime(settings, role="worker", middleware=middleware)
    try:
        require_secret_key(runtime.cipher, runtime.db)
    except ConfigurationError:
        runtime.close()
        raise
    # The one webhook outbox of this process: the sync job and the DLQ recorder record into it.
    outbox = Outbox(runtime.db, settings.webhook_queue, ttl=settings.webhook_directory_ttl)
    registry = ProviderRegistry(
        settings,
        dict(providers or {}),
        limiter=mailbox_limiter(runtime),
        credentials=StoredCredentials(runtime.db, runtime.cipher),
    )
    broker = runtime.broker
    return Worker(runtime, registry, broker, declare(broker, runtime, registry, outbox))

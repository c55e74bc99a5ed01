"""The API's services from one runtime: its database, its intake, the DLQ operations and readiness checks."""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path

from calsync.core.api.services import ApiServices
from calsync.core.observability.readings import StatusReader
from calsync.core.producer import dead_letters
from calsync.core.producer.dead_letters import ReplayReport
from calsync.core.producer.submit import Producer
from calsync.core.runtime import Runtime
from calsync.core.store.dead_letters import DeadLetter
from calsync.core.webhooks import Endpoints


def services_from_runtime(runtime: Runtime, *, metrics_dir: Path | None = None) -> ApiServices:
    """Everything the application needs, bound to ``runtime`` (which the caller closes)."""
    settings = runtime.settings
    reader = StatusReader(runtime)

    def broker() -> None:
        reader.queues(time.time())  # Redis: one script on the queue keys; RabbitMQ: a passive declare

    def replay(records: list[DeadLetter]) -> ReplayReport:
        return dead_letters.replay(runtime, records)

    def discard(record_ids: Iterable[int], note: str | None) -> list[int]:
        return dead_letters.discard(runtime, record_ids, note=note)

    return ApiServices(
        db=runtime.db,
        intake=Producer(runtime),
        replay=replay,
        discard=discard,
        checks={"broker": broker},
        max_body_bytes=settings.api_max_body_bytes,
        key_touch_interval=settings.api_key_touch_interval,
        key_cache_seconds=settings.api_key_cache_seconds,
        retry_after=settings.api_retry_after,
        metrics_dir=metrics_dir,
        webhooks=Endpoints.from_settings(runtime.db, runtime.cipher, settings),
    )

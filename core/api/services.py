"""What the HTTP application uses, handed in by its composition root (tests build their own), and the services of
one clients: its database, its intake, the DLQ operations, a job's cancel and readiness checks."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from calsync.core.clients import Clients
from calsync.core.model.dlq_reports import DiscardReportOut, ReplayReportOut
from calsync.core.observability.pipeline_state import StateReader
from calsync.core.producer import dead_letters
from calsync.core.producer.job_cancel import cancel_job
from calsync.core.producer.submit import Intake, Producer
from calsync.core.redis.pause import PauseSwitch
from calsync.core.store.database import Database
from calsync.core.store.dead_letters import DeadLetter
from calsync.core.webhooks import Endpoints


@dataclass(frozen=True)
class ApiServices:
    """The database, the intake, the DLQ operations, a job's cancel, readiness checks and the few limits of the API."""

    db: Database
    intake: Intake
    replay: Callable[[list[DeadLetter]], ReplayReportOut]
    discard: Callable[[list[DeadLetter], str | None], DiscardReportOut]
    webhooks: Endpoints  # /v1/webhooks
    # POST /v1/jobs/{job_id}/cancel: (tenant, job id, note) → the job's dead letter, None for no such job
    cancel: Callable[[str, str, str | None], DeadLetter | None]
    pause: PauseSwitch  # /v1/pause, for operators (and the console's overview)
    # A readiness check raises when its dependency cannot be reached (the database is always checked).
    checks: Mapping[str, Callable[[], object]] = field(default_factory=dict)
    max_body_bytes: int = 1_048_576
    key_cache_seconds: float = 5
    # Set when several server processes share one port: /metrics then sums their multiprocess files.
    metrics_dir: Path | None = None


def services_from_clients(clients: Clients, *, metrics_dir: Path | None = None) -> ApiServices:
    """Everything the application needs, bound to ``clients`` (which the caller closes)."""
    settings = clients.settings
    reader = StateReader(clients)
    return ApiServices(
        db=clients.db,
        intake=Producer(clients),
        replay=partial(dead_letters.replay, clients),
        discard=lambda records, note: dead_letters.discard_records(clients, records, note=note),
        webhooks=Endpoints.from_settings(clients.db, clients.cipher, settings),
        cancel=lambda tenant_id, job_id, note: cancel_job(clients, tenant_id, job_id, note=note),
        pause=PauseSwitch(clients.redis, clients.keys),
        # the broker's readiness: Redis, one script on the queue keys; RabbitMQ, a passive declare
        checks={"broker": lambda: reader.queues(time.time())},
        max_body_bytes=settings.api_max_body_bytes,
        key_cache_seconds=settings.api_key_cache_seconds,
        metrics_dir=metrics_dir,
    )

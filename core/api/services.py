"""What the HTTP application uses, handed in by its composition root (tests build their own)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from calsync.core.producer.dead_letters import ReplayReport
from calsync.core.producer.submit import Intake
from calsync.core.store.database import Database
from calsync.core.store.dead_letters import DeadLetter
from calsync.core.webhooks import Endpoints

Replay = Callable[[list[DeadLetter]], ReplayReport]
Discard = Callable[[Iterable[int], str | None], list[int]]
# A readiness check raises when its dependency cannot be reached (the database is always checked).
Check = Callable[[], object]


@dataclass(frozen=True)
class ApiServices:
    """The database, the intake, the DLQ operations, readiness checks and the few limits of the API."""

    db: Database
    intake: Intake
    replay: Replay
    discard: Discard
    checks: Mapping[str, Check] = field(default_factory=dict)
    max_body_bytes: int = 1_048_576
    key_touch_interval: float = 60
    key_cache_seconds: float = 5
    retry_after: int = 5
    # Set when several server processes share one port: /metrics then sums their multiprocess files.
    metrics_dir: Path | None = None
    webhooks: Endpoints | None = None  # /v1/webhooks (None: answered 404)

"""The pause switch: ``calsync pause`` sets one Redis key, ``calsync resume`` deletes it, workers honour it.

Kept in Redis because every worker reads Redis whatever the broker (with RabbitMQ, ``CALSYNC_REDIS_URL``).
While the key exists, each worker's consumers hand out no new delivery (core/worker/pause.py); producers go
on accepting and enqueueing. The first pause wins: pausing again keeps its time, author and reason.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from dataclasses import dataclass
from typing import Any

import redis

from calsync.core.redis.keys import RedisKeys


@dataclass(frozen=True)
class PauseState:
    """Since when processing is paused, by whom (``user@host``) and why."""

    since: float
    by: str
    reason: str | None

    def as_json(self) -> dict[str, Any]:
        """JSON-ready form for ``calsync pause`` and ``calsync status --json``."""
        since = dt.datetime.fromtimestamp(self.since, dt.UTC).isoformat(timespec="seconds")
        return {"since": since, "by": self.by, "reason": self.reason}


def _decode(raw: bytes | str | None) -> PauseState | None:
    if raw is None:
        return None
    try:
        doc = json.loads(raw)
    except ValueError:
        doc = None
    if not isinstance(doc, dict):
        return PauseState(0.0, "unknown", "unreadable pause switch value")  # still paused: the key is there
    since = doc.get("since")
    reason = doc.get("reason")
    return PauseState(
        float(since) if isinstance(since, int | float) else 0.0,
        str(doc.get("by") or "unknown"),
        reason if isinstance(reason, str) else None,
    )


class PauseSwitch:
    """Reads and flips the pause switch of one namespace."""

    def __init__(self, client: redis.Redis, keys: RedisKeys) -> None:
        self.redis = client
        self.key = keys.paused()

    def state(self) -> PauseState | None:
        """The switch as stored now: None while processing runs."""
        return _decode(self.redis.get(self.key))

    def pause(self, by: str, reason: str | None) -> tuple[PauseState, bool]:
        """Set the switch unless it is set; returns the switch and whether this call set it."""
        since = time.time()
        created = bool(self.redis.set(self.key, json.dumps({"since": since, "by": by, "reason": reason}), nx=True))
        return self.state() or PauseState(since, by, reason), created  # resumed in between: what this call wrote

    def resume(self) -> PauseState | None:
        """Clear the switch; returns what it was (None: it was not set)."""
        return _decode(self.redis.getdel(self.key))  # one atomic command (Redis 6.2+, docs/DEPLOY.md)

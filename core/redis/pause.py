"""The pause switch: ``calsync pause`` sets one Redis key, ``calsync resume`` deletes it, workers honour it.

Kept in Redis because every worker reads Redis whatever the broker (with RabbitMQ, ``CALSYNC_REDIS_URL``).
While the key exists, each worker's consumers hand out no new delivery (core/worker/pause.py); producers go
on accepting and enqueueing. The first pause wins: pausing again keeps its time, author and reason.
"""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

import redis
from pydantic import BaseModel, ValidationError

from calsync.core.redis.keys import RedisKeys


class PauseState(BaseModel, frozen=True):
    """Since when processing is paused, by whom (``user@host``) and why: the switch's value, as JSON."""

    since: float = 0.0
    by: str = "unknown"
    reason: str | None = None

    def as_json(self) -> dict[str, Any]:
        """JSON-ready form for ``calsync pause`` and ``calsync status --json``."""
        since = dt.datetime.fromtimestamp(self.since, dt.UTC).isoformat(timespec="seconds")
        return {"since": since, "by": self.by, "reason": self.reason}


def _decode(raw: bytes | str | None) -> PauseState | None:
    if raw is None:
        return None
    try:
        return PauseState.model_validate_json(raw)
    except ValidationError:  # still paused: the key is there
        return PauseState(reason="unreadable pause switch value")


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
        wanted = PauseState(since=time.time(), by=by, reason=reason)
        created = bool(self.redis.set(self.key, wanted.model_dump_json(), nx=True))
        return self.state() or wanted, created  # resumed in between: what this call wrote

    def resume(self) -> PauseState | None:
        """Clear the switch; returns what it was (None: it was not set)."""
        return _decode(self.redis.getdel(self.key))  # one atomic command (Redis 6.2+, docs/DEPLOY.md)

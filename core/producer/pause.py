"""Pause and resume processing as an operator: the switch flipped (core/redis/pause.py), then one audit row.

What the console's overview buttons and ``PUT``/``DELETE /v1/pause`` both do. The switch is flipped first and the
audit row written after Redis took it, so the log never claims a flip that did not happen; ``count`` is 0 when the
switch was already as asked (the first pause wins: pausing again keeps its time, author and reason).
"""

from __future__ import annotations

from sqlalchemy.engine import Connection

from calsync.core.redis.pause import PauseState, PauseSwitch
from calsync.core.store import audit
from calsync.core.store.database import Database


def _audit(conn: Connection, actor: str, action: str, changed: bool, detail: dict[str, str | None]) -> None:
    audit.record(conn, actor=actor, action=action, subject="pipeline", count=int(changed), detail=detail)


def pause(db: Database, switch: PauseSwitch, *, actor: str, reason: str | None) -> tuple[PauseState, bool]:
    """Pause as ``actor``: the switch as it now stands, and whether this call set it (raises RedisError)."""
    state, created = switch.pause(by=actor, reason=reason)
    with db.write() as conn:
        _audit(conn, actor, "pipeline.pause", created, {"reason": state.reason, "by": state.by})
    return state, created


def resume(db: Database, switch: PauseSwitch, *, actor: str) -> PauseState | None:
    """Resume as ``actor``: the pause this call removed, None when processing was running (raises RedisError)."""
    was = switch.resume()
    detail = {"paused_by": was.by, "reason": was.reason} if was is not None else {}
    with db.write() as conn:
        _audit(conn, actor, "pipeline.resume", was is not None, detail)
    return was

"""``/v1/pause``: the pause switch for operators, the API twin of the console's pause and resume buttons.

Operator keys only (``calsync operators create``): pausing stops every tenant's processing, which no tenant key may
do. ``GET`` reads the switch (any operator); ``PUT`` pauses (the first pause wins: its time, author and reason
stand) and ``DELETE`` resumes (role ``operator``), each writing one audit row as the console's buttons do.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Annotated

import redis
from fastapi import APIRouter, Body, Depends
from pydantic import BaseModel, ConfigDict, Field

from calsync.core.api.auth import OperatorActing, OperatorViewer, Services
from calsync.core.api.problems import AUTHENTICATED, ProblemError, problems
from calsync.core.producer import pause as pipeline_pause
from calsync.core.redis.pause import PauseState


def _switch_reachable() -> Iterator[None]:
    """Every route here reads or flips the switch, which Redis holds: Redis unreachable is 503 (nothing changed)."""
    try:
        yield
    except redis.RedisError as exc:
        detail = f"Redis, which holds the pause switch, is unreachable ({type(exc).__name__})"
        raise ProblemError(503, "unavailable", "Service Unavailable", detail) from exc


router = APIRouter(tags=["operators"], dependencies=[Depends(_switch_reachable)])


class PauseIn(BaseModel):
    """Why processing is paused (shown to everyone, kept in the audit log)."""

    model_config = ConfigDict(extra="forbid")

    reason: str | None = Field(default=None, max_length=500, pattern=r"^[^\x00-\x1f\x7f]*$")


class PauseOut(BaseModel):
    """The switch: paused or not, since when, by whom and why; ``changed`` says whether this request flipped it."""

    paused: bool
    since: dt.datetime | None = None
    by: str | None = None
    reason: str | None = None
    changed: bool = False


def _out(state: PauseState | None, *, paused: bool, changed: bool) -> PauseOut:
    # The switch as ``calsync pause`` and ``calsync status --json`` show it (``since`` to the second).
    return PauseOut(paused=paused, changed=changed, **(state.as_json() if state is not None else {}))


@router.get("/v1/pause", response_model=PauseOut, responses=problems(*AUTHENTICATED), summary="Read the pause switch")
def read_pause_switch(deps: Services, _operator: OperatorViewer) -> PauseOut:
    """Whether processing is paused, since when, by whom and why."""
    state = deps.pause.state()
    return _out(state, paused=state is not None, changed=False)


@router.put("/v1/pause", response_model=PauseOut, responses=problems(400, *AUTHENTICATED), summary="Pause processing")
def pause_processing(
    deps: Services, operator: OperatorActing, body: Annotated[PauseIn | None, Body()] = None
) -> PauseOut:
    """Pause every worker's processing (producers go on accepting); pausing again keeps the first pause."""
    reason = body.reason.strip() or None if body and body.reason else None
    state, created = pipeline_pause.pause(deps.db, deps.pause, actor=operator.name, reason=reason)
    return _out(state, paused=True, changed=created)


@router.delete("/v1/pause", response_model=PauseOut, responses=problems(*AUTHENTICATED), summary="Resume processing")
def resume_processing(deps: Services, operator: OperatorActing) -> PauseOut:
    """Resume processing; the answer says which pause was removed (``changed`` false: it was running)."""
    was = pipeline_pause.resume(deps.db, deps.pause, actor=operator.name)
    return _out(was, paused=False, changed=was is not None)

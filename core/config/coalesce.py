"""Coalescing settings: how long a target's next edits are coalesced, and how late a worker releases a due delay."""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, Field, model_validator

#: A coalesce window longer than this would hold every edit of a busy event back for minutes.
MAX_COALESCE_WINDOW = 60.0


class CoalesceSettings(BaseModel):
    """The producer's per-target coalesce window and the worker's poll (docs/notes/coalescing.md)."""

    # Seconds. The first edit of a burst is enqueued at once; an edit within the window of the previous
    # one is delayed by the window, so only the newest of them writes. 0 enqueues every edit at once.
    coalesce_window: float = Field(default=1.0, ge=0, le=MAX_COALESCE_WINDOW)
    # Seconds. A target edited without pause is still written this often (the window never holds longer).
    coalesce_max_wait: float = Field(default=10.0, gt=0)
    # Internal, seconds. The longest an idle worker consumer sleeps between polls (Dramatiq's worker_timeout,
    # 1 s by default), so also how late a due delayed message (a coalesced edit, a retry, a lock wait) is released.
    worker_poll_interval: ClassVar[float] = 0.25

    @model_validator(mode="after")
    def _check_hold(self) -> CoalesceSettings:
        if self.coalesce_max_wait < self.coalesce_window:
            raise ValueError(
                "CALSYNC_COALESCE_MAX_WAIT must be at least CALSYNC_COALESCE_WINDOW "
                f"({self.coalesce_max_wait} < {self.coalesce_window})"
            )
        return self

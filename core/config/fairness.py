"""Tenant fairness settings: when a tenant's jobs overflow into the bulk lane (docs/notes/fairness.md).

A tenant that enqueued more than ``BULK_THRESHOLD`` jobs within the last ``BULK_WINDOW`` seconds has
its further jobs sent to the bulk queue, which workers consume next to the normal one with a prefetch
of its own, so a flood never stands in front of another tenant's change.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field, model_validator


class FairnessSettings(BaseModel):
    """The overflow lane: its queue, and the per-tenant rate past which jobs take it."""

    # The overflow lane's queue; unset: <QUEUE>-bulk.
    bulk_queue: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_-]+$")
    # Jobs a tenant may enqueue per window on the normal lane; 0 sends nothing to the bulk lane.
    bulk_threshold: int = Field(default=100, ge=0)
    # The sliding window of that count, in seconds.
    bulk_window: float = Field(default=60, ge=1, le=86400)

    @model_validator(mode="after")
    def _check_bulk_queue(self) -> Any:
        bulk = self.effective_bulk_queue
        clash = [name for name in ("queue", "intake_queue") if getattr(self, name, None) == bulk]
        if clash:
            raise ValueError(f"CALSYNC_BULK_QUEUE must differ from CALSYNC_{clash[0].upper()} ({bulk!r})")
        return self

    @property
    def effective_bulk_queue(self) -> str:
        """The bulk lane's queue: ``BULK_QUEUE``, else ``<QUEUE>-bulk``."""
        # QUEUE is a field of Settings, the class this mixin is a base of.
        return self.bulk_queue or f"{getattr(self, 'queue', 'calendar')}-bulk"

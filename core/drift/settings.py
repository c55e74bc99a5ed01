"""Drift settings (a mixin of :class:`~core.config.settings.Settings`): how often each account is swept.

It imports nothing of calsync, so core/config/settings.py may import it (the one import into this package
that pyproject's contracts allow besides the package's own modules).
"""

from __future__ import annotations

from typing import Final

from pydantic import BaseModel, Field, field_validator

#: Seconds between two sweeps of one account unless CALSYNC_DRIFT_INTERVAL says otherwise (issue 34: 5 minutes).
DEFAULT_DRIFT_INTERVAL: Final[float] = 300.0
#: The shortest interval: a sweep costs a request per account, and an interval below the maintenance pass's means
#: nothing anyway.
MIN_DRIFT_INTERVAL: Final[float] = 10.0


class DriftSettings(BaseModel):
    """``CALSYNC_DRIFT_*``: when calsync reads its events back from each provider (docs/ARCHITECTURE.md, "drift")."""

    # Seconds between two sweeps of one account (a read-back of what changed since the last one: one request when
    # nothing did). Lower notices drift sooner and costs more provider quota; 0: workers schedule no sweep at all.
    drift_interval: float = Field(default=DEFAULT_DRIFT_INTERVAL, ge=0, le=86400)

    @field_validator("drift_interval")
    @classmethod
    def _check_drift_interval(cls, value: float) -> float:
        if 0 < value < MIN_DRIFT_INTERVAL:
            raise ValueError(f"must be 0 (no sweeps) or at least {MIN_DRIFT_INTERVAL:g} seconds")
        return value

    @property
    def drift_enabled(self) -> bool:
        """Whether workers schedule sweeps."""
        return self.drift_interval > 0

    @property
    def effective_drift_queue(self) -> str:
        """The sweeps' queue, ``<QUEUE>-drift`` (derived as the bulk lane's is): a sweep never waits behind a write,
        nor a write behind a sweep."""
        # QUEUE is a field of Settings, the class this mixin is a base of.
        return f"{getattr(self, 'queue', 'calendar')}-drift"

"""Settings of housekeeping: how often workers prune, how much one pass may delete, how long rows are kept,
and when a delete that found nothing at the provider is repeated (a create racing it may land later).

A mixin of :class:`core.config.settings.Settings` (fields become ``CALSYNC_*`` variables as usual).
Sizing and what is pruned when: docs/RUNBOOK.md §Housekeeping.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, Field, model_validator

#: A retention of 0 keeps rows forever.
KEEP_FOREVER = 0


class HousekeepingSettings(BaseModel):
    """The maintenance pass run by workers (one at a time per deployment) and the retention windows it applies."""

    # Seconds between two maintenance passes of the whole deployment (0: workers never run one; the
    # reconciler's pass remains).
    maintenance_interval: float = Field(default=10, ge=0)
    # Internal: rows one statement deletes; a pass repeats it per table while a full batch went and time is
    # left, at most MAX_BATCHES times: a pass deletes at most 100,000 rows of each table.
    maintenance_batch: ClassVar[int] = 2000
    maintenance_max_batches: ClassVar[int] = 50
    # Resolved (replayed or discarded) dead letters are deleted this many seconds after being resolved.
    dead_letter_retention: float = Field(default=30 * 86400, ge=0)
    # A cancelled event whose every target is deleted is pruned with its targets and idempotency records
    # this many seconds after its last change.
    cancelled_event_retention: float = Field(default=7 * 86400, ge=0)
    # A webhook notification whose every delivery is finished (delivered, or failed with no open dead letter)
    # is pruned with its deliveries this many seconds after its last change.
    webhook_retention: float = Field(default=7 * 86400, ge=0)
    # Drift findings (``calsync drift list``) are deleted this many seconds after they were found.
    drift_finding_retention: float = Field(default=30 * 86400, ge=0)
    # A delete that knew no provider id (the target's create never reported back: it may still be in flight,
    # its client gave up) runs once more this many seconds later (0: never).
    delete_verify_delay: float = Field(default=120, ge=0, le=86400)

    @model_validator(mode="after")
    def _check_retention(self) -> HousekeepingSettings:
        # A duplicate delivery of a cancelled event's job must still find its event and records (and be
        # acked as stale or already done) for as long as idempotency is promised; and the outbox deduplicates a
        # notification recorded again by its stable id for as long as its job is.
        ttl = getattr(self, "idempotency_ttl", None)  # Settings' own field (this is its mixin)
        for name in ("cancelled_event_retention", "webhook_retention"):
            kept = getattr(self, name)
            if ttl is not None and kept != KEEP_FOREVER and kept < ttl:
                raise ValueError(
                    f"CALSYNC_{name.upper()} must be 0 (keep) or at least CALSYNC_IDEMPOTENCY_TTL ({kept:g} < {ttl})"
                )
        retention, webhooks = self.cancelled_event_retention, self.webhook_retention
        # A delete's re-run must find its event: pruned, it would be dead-lettered as not found.
        if retention != KEEP_FOREVER and retention <= self.delete_verify_delay:
            raise ValueError(
                "CALSYNC_CANCELLED_EVENT_RETENTION must be 0 (keep) or greater than CALSYNC_DELETE_VERIFY_DELAY "
                f"({retention:g} <= {self.delete_verify_delay:g})"
            )
        # Notification ids are derived from (tenant, event, version): once a cancelled event is pruned its id may
        # be used again, and a notification of the old event still in the outbox would swallow the new one's.
        if retention != KEEP_FOREVER and (webhooks == KEEP_FOREVER or webhooks > retention):
            raise ValueError(
                "CALSYNC_WEBHOOK_RETENTION must be at most CALSYNC_CANCELLED_EVENT_RETENTION (and not 0 while "
                f"cancelled events are pruned): {webhooks:g} > {retention:g}"
            )
        # The re-run must come after the create's client gave up, or it may find nothing again.
        timeout = getattr(self, "provider_timeout", None)
        if timeout is not None and self.delete_verify_delay and self.delete_verify_delay < timeout:
            raise ValueError(
                "CALSYNC_DELETE_VERIFY_DELAY must be 0 (never) or at least CALSYNC_PROVIDER_TIMEOUT "
                f"({self.delete_verify_delay:g} < {timeout:g})"
            )
        return self

    @property
    def maintenance_enabled(self) -> bool:
        """Whether worker processes run the maintenance pass."""
        return self.maintenance_interval > 0

"""``sync_calendar_event``: make one event appear (or disappear) in one account, as its latest version says."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from core.sync import run_sync

if TYPE_CHECKING:
    from core.runtime import Runtime


def sync_calendar_event(runtime: Runtime, payload: dict[str, Any]) -> None:
    """Dramatiq entry point; validation, idempotency, locking and staleness were handled by middleware."""
    run_sync(runtime, payload)

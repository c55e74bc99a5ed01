"""``reconcile``: re-enqueue pending targets whose messages the broker lost (sent by the CronJob)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.reconcile import reconcile as run_reconcile

if TYPE_CHECKING:
    from core.runtime import Runtime


def reconcile(runtime: Runtime) -> None:
    """Dramatiq entry point for the periodic reconciliation."""
    run_reconcile(runtime)

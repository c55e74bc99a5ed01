"""The drift counters a sweep increments (docs/METRICS.md, "Worker metrics"): findings by provider and kind, and
those an ``enforce`` policy repaired.

Imported by the sweep when it records a finding and by the worker's boot (:func:`export_drift_zeros`), so a command
that only loads the settings never loads prometheus_client. In a worker process they are multiprocess counters like
the others. Labels stay bounded: a provider name and a :data:`DriftKind`, never a tenant, account or event.
"""

from __future__ import annotations

from typing import get_args

from prometheus_client import Counter

from calsync.core.model.calendar import ProviderName
from calsync.core.model.drift import DRIFT_KINDS, DriftKind

DRIFT_DETECTED = Counter(
    "calsync_drift_detected_total",
    "Drift a sweep found and recorded (reported or repaired), by provider and kind: deleted_externally, "
    "modified_externally, missing, unknown_item.",
    ["provider", "kind"],
)
DRIFT_REPAIRED = Counter(
    "calsync_drift_repaired_total",
    "Drift an enforce policy repaired (the target re-asserted through the queue, or the orphan deleted), by provider "
    "and kind; a subset of calsync_drift_detected_total.",
    ["provider", "kind"],
)


def count_finding(provider: str, kind: DriftKind, *, repaired: bool) -> None:
    """One finding recorded by a sweep of an account of ``provider``; ``repaired`` when the policy enforced it."""
    DRIFT_DETECTED.labels(provider, kind).inc()
    if repaired:
        DRIFT_REPAIRED.labels(provider, kind).inc()


def export_drift_zeros() -> None:
    """Create every (provider, kind) series of both counters at 0 when a worker process boots, so the first findings
    of a new pod show in ``increase()`` (core/worker/metrics.py, ``export_zeros``, says why)."""
    for provider in get_args(ProviderName):
        for kind in DRIFT_KINDS:
            DRIFT_DETECTED.labels(provider, kind)
            DRIFT_REPAIRED.labels(provider, kind)

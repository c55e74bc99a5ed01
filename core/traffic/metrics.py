"""The metric traffic control emits (docs/METRICS.md): imported by the gate when it first holds a call, so a
command that only loads the settings (every ``calsync`` command does) never loads prometheus_client."""

from __future__ import annotations

from prometheus_client import Counter

TRAFFIC_DEFERRALS = Counter(
    "calsync_traffic_deferrals_total",
    "Provider calls traffic control held back (the job re-enqueued without using an attempt), by what held them.",
    ["provider", "limit"],
)

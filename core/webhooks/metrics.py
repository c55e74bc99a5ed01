"""Webhook delivery metrics (docs/METRICS.md): attempts by outcome and status class, latency, breaker trips.

Labels are low-cardinality: the outcome vocabulary and the status class (``2xx``..``5xx``, ``timeout``,
``connection``, ``none``), never a tenant, endpoint or URL.
"""

from __future__ import annotations

import httpx
from prometheus_client import Counter, Histogram

from calsync.core.model.vocabulary import WebhookOutcome

DELIVERIES = Counter(
    "calsync_webhook_deliveries_total",
    "Webhook delivery attempts by outcome (delivered, retry_scheduled, permanent, exhausted, refused, skipped) "
    "and the answer's status class.",
    ["outcome", "status_class"],
)
DELIVERY_SECONDS = Histogram(
    "calsync_webhook_delivery_seconds",
    "Time of one webhook request, from the connection to the answer (or the timeout).",
    ["status_class"],
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
ENDPOINTS_DISABLED = Counter(
    "calsync_webhook_endpoints_auto_disabled_total",
    "Webhook endpoints the breaker disabled after failing for WEBHOOK_DISABLE_AFTER seconds.",
)


def status_class(status: int | None, error: BaseException | None = None) -> str:
    """``2xx``..``5xx`` for an answer, ``timeout`` or ``connection`` for none, ``none`` when not attempted."""
    if status is not None:
        return f"{status // 100}xx"
    if error is None:
        return "none"
    return "timeout" if isinstance(error, httpx.TimeoutException) else "connection"


def count(outcome: WebhookOutcome, status: int | None = None, error: BaseException | None = None) -> None:
    """One attempt (or skip) counted."""
    DELIVERIES.labels(outcome.value, status_class(status, error)).inc()

"""The metric names of issue 5, the contract between the code that emits them and the rules that read them.

Only these (and Prometheus' own ``up``) may appear in the generated rules and dashboard. Dramatiq's own
``dramatiq_*`` metrics are left out on purpose: ``dramatiq_message_retries_total`` counts every retry twice
and ``dramatiq_delayed_messages_inprogress`` drifts across processes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from calsync.core.model.drift import DRIFT_KINDS
from calsync.core.model.vocabulary import OUTSTANDING_STATUSES, Outcome

Source = Literal["worker", "exporter", "prometheus"]
Kind = Literal["counter", "gauge", "histogram"]

OUTCOMES = tuple(Outcome)
# Finished attempts that did their job, and those that did not; lock_busy is contention, charted on its own.
GOOD_OUTCOMES = (Outcome.SUCCESS, Outcome.ALREADY_DONE, Outcome.STALE)
FAILED_OUTCOMES = (Outcome.RETRY_SCHEDULED, Outcome.DEAD_LETTERED)
FINISHED_OUTCOMES = GOOD_OUTCOMES + FAILED_OUTCOMES

# Labels Prometheus or the Kubernetes service discovery attach to every scraped series.
TARGET_LABELS = frozenset({"job", "instance", "namespace", "pod", "container", "cluster"})
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


@dataclass(frozen=True)
class Metric:
    """One metric family: who exposes it, its type, and its labels (with the allowed values where fixed)."""

    name: str
    source: Source
    kind: Kind
    labels: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def series_names(self) -> tuple[str, ...]:
        """Names that appear in PromQL: a histogram is read through its _bucket, _sum and _count series."""
        if self.kind == "histogram":
            return tuple(self.name + suffix for suffix in HISTOGRAM_SUFFIXES)
        return (self.name,)


ANY: tuple[str, ...] = ()  # a label whose values are open (job types, providers, queues, versions, …)

_METRICS = (
    Metric("calsync_jobs_total", "worker", "counter", {"job_type": ANY, "provider": ANY, "outcome": OUTCOMES}),
    Metric("calsync_job_duration_seconds", "worker", "histogram", {"job_type": ANY, "provider": ANY, "le": ANY}),
    Metric("calsync_job_retries_total", "worker", "counter", {"job_type": ANY, "provider": ANY, "error_class": ANY}),
    Metric(
        "calsync_provider_requests_total",
        "worker",
        "counter",
        {
            "provider": ANY,
            "operation": ("create", "update", "delete"),
            "status_class": ("ok", "temporary_error", "permanent_error"),
        },
    ),
    Metric(
        "calsync_provider_request_duration_seconds",
        "worker",
        "histogram",
        {"provider": ANY, "operation": ("create", "update", "delete"), "le": ANY},
    ),
    Metric("calsync_lock_acquisitions_total", "worker", "counter", {"result": ("acquired", "busy")}),
    Metric("calsync_dead_letters_total", "worker", "counter", {"job_type": ANY, "reason": ANY}),
    Metric("calsync_worker_heartbeat_timestamp_seconds", "worker", "gauge", {"worker": ANY}),
    Metric("calsync_build_info", "worker", "gauge", {"version": ANY}),
    Metric("calsync_queue_ready_messages", "exporter", "gauge", {"queue": ANY}),
    Metric("calsync_queue_delayed_messages", "exporter", "gauge", {"queue": ANY}),
    Metric("calsync_queue_inflight_messages", "exporter", "gauge", {"queue": ANY}),
    Metric("calsync_queue_oldest_message_age_seconds", "exporter", "gauge", {"queue": ANY}),
    Metric("calsync_dead_letters_open", "exporter", "gauge", {"job_type": ANY}),
    Metric("calsync_dead_letter_oldest_age_seconds", "exporter", "gauge"),
    Metric("calsync_sync_targets", "exporter", "gauge", {"status": OUTSTANDING_STATUSES}),
    Metric("calsync_sync_pending_oldest_age_seconds", "exporter", "gauge"),
    Metric("calsync_workers_active", "exporter", "gauge"),
    # Beyond issue 5: 0 while the exporter cannot read a source, whose series it then leaves out.
    Metric("calsync_exporter_source_up", "exporter", "gauge", {"source": ("broker", "database", "redis")}),
    # Beyond issue 5: traffic control (issue 14), docs/METRICS.md.
    Metric("calsync_traffic_deferrals_total", "worker", "counter", {"provider": ANY, "limit": ANY}),
    Metric("calsync_circuit_state", "exporter", "gauge", {"provider": ANY, "scope": ("provider", "account")}),
    Metric("calsync_circuit_accounts_not_closed", "exporter", "gauge", {"provider": ANY}),
    Metric("calsync_provider_blocked_seconds", "exporter", "gauge", {"provider": ANY}),
    # Issue 18: webhook endpoints the breaker (auto) or an operator disabled.
    Metric("calsync_webhook_endpoints_disabled", "exporter", "gauge", {"by": ("auto", "operator")}),
    Metric("calsync_webhook_deliveries_total", "worker", "counter", {"outcome": ANY, "status_class": ANY}),
    Metric("calsync_webhook_delivery_seconds", "worker", "histogram", {"status_class": ANY, "le": ANY}),
    # Issue 34: drift detection: what sweeps found and repaired, and how far verification is behind.
    Metric("calsync_drift_detected_total", "worker", "counter", {"provider": ANY, "kind": DRIFT_KINDS}),
    Metric("calsync_drift_repaired_total", "worker", "counter", {"provider": ANY, "kind": DRIFT_KINDS}),
    Metric("calsync_drift_sweep_age_seconds", "exporter", "gauge"),
    Metric("calsync_drift_sweeps_overdue", "exporter", "gauge"),
    Metric("up", "prometheus", "gauge"),
)

METRICS: dict[str, Metric] = {m.name: m for m in _METRICS}


def series_names() -> frozenset[str]:
    """Every name a PromQL expression may select."""
    return frozenset(name for metric in _METRICS for name in metric.series_names())


def family_of(series: str) -> Metric:
    """The metric family behind a series name (``calsync_job_duration_seconds_bucket`` → the histogram)."""
    for metric in _METRICS:
        if series in metric.series_names():
            return metric
    raise KeyError(f"{series!r} is not a metric of the contract (k8s/monitoring/source/contract.py)")

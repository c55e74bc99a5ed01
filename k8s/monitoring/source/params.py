"""The knobs of the generated rules and dashboard, in one place so that a threshold is never typed twice."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Params:
    """The committed files are generated from the defaults; ``--out`` variants may override any field."""

    # Scrape jobs: the `job` label Prometheus gives the worker pods (PodMonitor) and the exporter (ServiceMonitor).
    worker_job: str = "calsync-worker"
    exporter_job: str = "calsync-exporter"
    # Labels that tell one deployment from another; every aggregation keeps them, the dashboard filters on them.
    scope_labels: tuple[str, ...] = ("namespace",)
    # kube-prometheus-stack's Prometheus only loads PrometheusRules whose `release` label is its Helm release.
    release: str = "kube-prometheus-stack"
    # Where runbook_url points: relative by default; pass the browsable URL of docs/RUNBOOK.md for Alertmanager.
    runbook_base: str = "docs/RUNBOOK.md"

    # Queue
    backlog_min_messages: int = 100
    backlog_window: str = "15m"
    oldest_message_max_age_s: int = 900
    # Jobs
    job_window: str = "15m"
    min_success_ratio: float = 0.9
    min_finished_jobs: int = 20
    dead_letter_burst: int = 10
    # Deploys
    deploy_window: str = "1h"
    retry_window: str = "10m"
    retry_spike_factor: int = 3
    retry_spike_min_per_s: float = 0.05
    # Workers and reconciliation (CALSYNC_RECONCILE_AFTER)
    heartbeat_stale_after_s: int = 120
    reconcile_after_s: int = 600
    # Drift detection (CALSYNC_DRIFT_INTERVAL, 300 s): an account unswept for three intervals is behind.
    drift_sweep_max_age_s: int = 900


DEFAULTS = Params()

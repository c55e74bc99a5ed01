"""The Grafana 11 dashboard, built from :mod:`promql` so each panel plots the same signal its alert tests.

A small builder of our own instead of grafana-foundation-sdk: the dashboard needs time series and stat panels
only, and the SDK (not a calsync dependency) would pin its Grafana target through a build-epoch version.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from .alerts import alerts
from .params import Params
from .promql import PromQL

SCHEMA_VERSION = 39  # Grafana 11.0; later 11.x releases migrate it on load
GRID_WIDTH = 24
RATE = "$__rate_interval"
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


@dataclass(frozen=True)
class Query:
    """One PromQL target and its legend."""

    expr: str
    legend: str


@dataclass(frozen=True)
class Limit:
    """An alert's threshold drawn on a panel: red beyond it, in the direction that is bad."""

    alert: str
    value: float
    bad: Literal["above", "below"] = "above"


@dataclass(frozen=True)
class Panel:
    """A time series or stat panel; width and height are in Grafana grid units (24 columns)."""

    title: str
    description: str
    queries: tuple[Query, ...]
    unit: str = "short"
    kind: Literal["timeseries", "stat"] = "timeseries"
    width: int = 12
    height: int = 8
    stacked: bool = False
    limit: Limit | None = None


@dataclass(frozen=True)
class Row:
    """A titled band of panels, laid out left to right."""

    title: str
    panels: tuple[Panel, ...]


def _stat(title: str, description: str, expr: str, legend: str, unit: str, limit: Limit | None = None) -> Panel:
    return Panel(title, description, (Query(expr, legend),), unit, "stat", width=4, height=4, limit=limit)


def rows(params: Params) -> list[Row]:
    """Every panel of the dashboard, grouped in rows."""
    q = PromQL(params, filters={label: f"${label}" for label in params.scope_labels})
    p = params

    def legend(*labels: str, text: str = "") -> str:
        """``{{namespace}} {{label}}… text``: every series names its deployment first."""
        return " ".join([*(f"{{{{{label}}}}}" for label in (*p.scope_labels, *labels)), text]).strip()

    return [
        Row("Overview", (
            _stat("Ready messages", "Messages waiting in the ready lists of all queues.",
                  q.sum(q.sel("calsync_queue_ready_messages")), legend(), "short"),
            _stat("Oldest ready message", "Age of the oldest ready message over all queues.",
                  q.agg("max", q.sel("calsync_queue_oldest_message_age_seconds")), legend(), "s",
                  Limit("CalsyncOldestMessageTooOld", p.oldest_message_max_age_s)),
            _stat("Open dead letters", "Dead letters nobody replayed or discarded yet (calsync dlq list).",
                  q.sum(q.sel("calsync_dead_letters_open")), legend(), "short"),
            _stat("Active workers", "Worker processes with a live heartbeat key, as the exporter counts them.",
                  q.active_workers(), legend(), "short", Limit("CalsyncNoActiveWorkers", 1, "below")),
            _stat(f"Success ratio ({p.job_window})", "Finished attempts that succeeded, were already done or "
                  "were stale, out of all finished attempts (lock_busy excluded).",
                  q.success_ratio(p.job_window), legend(), "percentunit",
                  Limit("CalsyncSuccessRatioDropped", p.min_success_ratio, "below")),
            _stat("Running versions", "Worker pods per calsync version (calsync_build_info).",
                  q.agg("count", q.sel("calsync_build_info"), "version"), legend("version"), "short"),
        )),
        Row("Jobs", (
            Panel("Throughput by outcome", "Finished job attempts per second, by outcome.",
                  (Query(q.rate("calsync_jobs_total", RATE, "outcome"), legend("outcome")),), "ops", stacked=True),
            Panel("Success ratio by job type and provider",
                  f"Same signal and {p.job_window} window as CalsyncSuccessRatioDropped (which also needs "
                  f"{p.min_finished_jobs} finished attempts per {p.job_window}).",
                  (Query(q.success_ratio(p.job_window, "job_type", "provider"), legend("job_type", "provider")),),
                  "percentunit", limit=Limit("CalsyncSuccessRatioDropped", p.min_success_ratio, "below")),
            Panel("Retries by error class", "Retries scheduled per second, by the error that caused them. "
                  "Deploys are marked on the time axis.",
                  (Query(q.rate("calsync_job_retries_total", RATE, "error_class"), legend("error_class")),),
                  "ops", stacked=True),
            Panel("Job duration by job type and provider", "p50, p95 and p99 of a job attempt's duration.",
                  tuple(Query(q.quantile(quantile, "calsync_job_duration_seconds", RATE, "job_type", "provider"),
                              legend("job_type", "provider", text=f"p{round(quantile * 100)}"))
                        for quantile in (0.5, 0.95, 0.99)), "s"),
        )),
        Row("Queue", (
            Panel("Queue depth", "Ready, delayed (retries waiting for their time) and in-flight messages per queue "
                  "(RabbitMQ: ready only).",
                  tuple(Query(q.sum(q.sel(f"calsync_queue_{kind}_messages"), "queue"),
                              legend("queue", text=kind)) for kind in ("ready", "delayed", "inflight")),
                  "short", limit=Limit("CalsyncQueueBacklogRising", p.backlog_min_messages)),
            Panel("Oldest ready message age", "How long the head of each ready list has been ready (a retry "
                  "counts from its due time). Not available on RabbitMQ.",
                  (Query(q.agg("max", q.sel("calsync_queue_oldest_message_age_seconds"), "queue"),
                         legend("queue")),), "s",
                  limit=Limit("CalsyncOldestMessageTooOld", p.oldest_message_max_age_s)),
            Panel("Pending and failed sync targets", "Event targets waiting for a sync, and those that failed.",
                  (Query(q.sum(q.sel("calsync_sync_targets", status=("pending", "failed")), "status"),
                         legend("status")),), "short"),
            Panel("Most overdue pending target", "How long past its due time the most overdue pending target is; "
                  "the reconciler re-enqueues targets past CALSYNC_RECONCILE_AFTER.",
                  (Query(q.agg("max", q.sel("calsync_sync_pending_oldest_age_seconds")), legend()),), "s",
                  limit=Limit("CalsyncSyncTargetsOverdue", p.reconcile_after_s)),
        )),
        Row("Dead letters", (
            Panel("Open dead letters by job type", "Dead letters waiting for a replay or a discard.",
                  (Query(q.sum(q.sel("calsync_dead_letters_open"), "job_type"), legend("job_type")),),
                  "short", width=8),
            Panel(f"New dead letters per {p.job_window} by reason",
                  "Same signal as CalsyncDeadLettersGrowingFast.",
                  (Query(q.new_dead_letters(p.job_window, "job_type", "reason"),
                         legend("job_type", "reason")),),
                  "short", width=8, limit=Limit("CalsyncDeadLettersGrowingFast", p.dead_letter_burst)),
            Panel("Oldest open dead letter", "Age of the oldest dead letter nobody handled yet.",
                  (Query(q.agg("max", q.sel("calsync_dead_letter_oldest_age_seconds")), legend()),), "s", width=8),
        )),
        Row("Providers", (
            Panel("Provider requests by status class", "Calendar API calls per second.",
                  (Query(q.rate("calsync_provider_requests_total", RATE, "provider", "status_class"),
                         legend("provider", "status_class")),), "ops", width=8, stacked=True),
            Panel("Provider error ratio", "Share of calendar API calls that failed, temporarily (retried) or "
                  "permanently (dead-lettered).",
                  tuple(Query(q.ratio(q.rate("calsync_provider_requests_total", RATE, "provider", status_class=cls),
                                      q.rate("calsync_provider_requests_total", RATE, "provider")),
                              legend("provider", text=cls))
                        for cls in ("temporary_error", "permanent_error")), "percentunit", width=8),
            Panel("Provider request duration", "p95 and p99 of calendar API calls by provider and operation.",
                  tuple(Query(q.quantile(quantile, "calsync_provider_request_duration_seconds", RATE, "provider",
                                         "operation"),
                              legend("provider", "operation", text=f"p{round(quantile * 100)}"))
                        for quantile in (0.95, 0.99)), "s", width=8),
        )),
        Row("Traffic control", (
            Panel("Circuit breakers", "Per provider: the provider-wide breaker and the worst of its accounts' "
                  "breakers; 0 closed, 1 half-open (one probe at a time), 2 open. The alert watches scope provider.",
                  (Query(q.agg("max", q.sel("calsync_circuit_state"), "provider", "scope"),
                         legend("provider", "scope")),), "short", width=6,
                  limit=Limit("CalsyncProviderCircuitOpen", 1)),
            Panel("Accounts with a breaker not closed", "Accounts whose breaker is open or half-open (refused "
                  "credentials open these, never the provider's).",
                  (Query(q.agg("max", q.sel("calsync_circuit_accounts_not_closed"), "provider"),
                         legend("provider")),), "short", width=6),
            Panel("Provider blocked for", "Seconds every job of the provider is still held by a back-off the "
                  "provider asked for (a per-project quota); 0 when none.",
                  (Query(q.agg("max", q.sel("calsync_provider_blocked_seconds"), "provider"),
                         legend("provider")),), "s", width=6),
            Panel("Traffic deferrals by limit", "Provider calls held back per second (no attempt used), by what "
                  "held them: a limit, a back-off, a breaker, or a failure excused as the provider's outage.",
                  (Query(q.rate("calsync_traffic_deferrals_total", RATE, "provider", "limit"),
                         legend("provider", "limit")),), "ops", width=6, stacked=True),
        )),
        Row("Webhooks", (
            Panel("Webhook deliveries by outcome", "Delivery attempts per second: delivered (2xx), retry_scheduled "
                  "(5xx, 408, 429, timeouts), permanent (another 4xx), by the answer's status class.",
                  (Query(q.rate("calsync_webhook_deliveries_total", RATE, "outcome", "status_class"),
                         legend("outcome", "status_class")),), "ops", width=8, stacked=True),
            Panel("Webhook request duration", "p95 of one webhook request, connection to answer (or timeout).",
                  (Query(q.quantile(0.95, "calsync_webhook_delivery_seconds", RATE, "status_class"),
                         legend("status_class", text="p95")),), "s", width=8),
            Panel("Disabled webhook endpoints", "Endpoints disabled by their breaker (auto) or an operator; their "
                  "tenants get no notifications until one is enabled again.",
                  (Query(q.agg("max", q.sel("calsync_webhook_endpoints_disabled"), "by"), legend("by")),), "short",
                  width=8, limit=Limit("CalsyncWebhookEndpointDisabled", 1)),
        )),
        Row("Drift", (
            Panel("Drift found and repaired", "Findings of the sweeps per second by provider and kind (users' edits "
                  "and deletions, orphans), and those an enforce policy repaired.",
                  (Query(q.rate("calsync_drift_detected_total", RATE, "provider", "kind"),
                         legend("provider", "kind", text="found")),
                   Query(q.rate("calsync_drift_repaired_total", RATE, "provider", "kind"),
                         legend("provider", "kind", text="repaired"))), "ops", width=8),
            Panel("Drift sweep age", "Seconds since the least recently swept account was read back.",
                  (Query(q.agg("max", q.sel("calsync_drift_sweep_age_seconds")), legend(text="oldest sweep")),), "s",
                  width=8, limit=Limit("CalsyncDriftVerificationBehind", p.drift_sweep_max_age_s)),
            Panel("Overdue drift sweeps", "Accounts due for a sweep by more than CALSYNC_DRIFT_INTERVAL that no "
                  "worker claimed.",
                  (Query(q.agg("max", q.sel("calsync_drift_sweeps_overdue")), legend(text="overdue")),), "short",
                  width=8, limit=Limit("CalsyncDriftVerificationBehind", 1)),
        )),
        Row("Workers and locks", (
            Panel("Active workers", "Worker processes with a live heartbeat key (exporter) and worker processes "
                  "exporting a heartbeat series (scraped).",
                  (Query(q.active_workers(), legend(text="active")),
                   Query(q.agg("count", q.sel("calsync_worker_heartbeat_timestamp_seconds")),
                         legend(text="scraped"))), "short", width=8,
                  limit=Limit("CalsyncNoActiveWorkers", 1, "below")),
            Panel("Worker heartbeat age", "Seconds since each worker process renewed its heartbeat.",
                  (Query(q.heartbeat_age(), legend("worker")),), "s", width=8,
                  limit=Limit("CalsyncWorkerHeartbeatStale", p.heartbeat_stale_after_s)),
            Panel("Lock contention ratio", "Share of lock attempts that found the event target locked by "
                  "another worker.",
                  (Query(q.ratio(q.rate("calsync_lock_acquisitions_total", RATE, result="busy"),
                                 q.rate("calsync_lock_acquisitions_total", RATE)), legend(text="busy")),),
                  "percentunit", width=8),
            Panel("Exporter sources readable", "1 while the queue exporter can read the source (broker, database, "
                  "Redis); at 0 the series from that source are missing.",
                  (Query(q.agg("min", q.sel("calsync_exporter_source_up"), "source"), legend("source")),),
                  "short", width=8, limit=Limit("CalsyncExporterSourceDown", 1, "below")),
        )),
    ]  # fmt: skip


def _thresholds(limit: Limit | None) -> dict[str, Any]:
    if limit is None:
        steps: list[dict[str, Any]] = [{"color": "green", "value": None}]
    elif limit.bad == "above":
        steps = [{"color": "green", "value": None}, {"color": "red", "value": limit.value}]
    else:
        steps = [{"color": "red", "value": None}, {"color": "green", "value": limit.value}]
    return {"mode": "absolute", "steps": steps}


def _targets(panel: Panel) -> list[dict[str, Any]]:
    return [
        {
            "refId": chr(ord("A") + index),
            "datasource": DATASOURCE,
            "editorMode": "code",
            "expr": query.expr,
            "legendFormat": query.legend or "__auto",
            "range": True,
        }
        for index, query in enumerate(panel.queries)
    ]


def _options(panel: Panel) -> dict[str, Any]:
    if panel.kind == "stat":
        return {
            "colorMode": "value",
            "graphMode": "area",
            "justifyMode": "auto",
            "orientation": "auto",
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "textMode": "auto",
        }
    return {
        "legend": {"calcs": ["lastNotNull", "max"], "displayMode": "table", "placement": "bottom", "showLegend": True},
        "tooltip": {"mode": "multi", "sort": "desc"},
    }


def _field_defaults(panel: Panel) -> dict[str, Any]:
    defaults: dict[str, Any] = {"unit": panel.unit, "thresholds": _thresholds(panel.limit)}
    if panel.unit == "percentunit":
        defaults |= {"min": 0, "max": 1}
    if panel.kind == "stat":
        return defaults | {"color": {"mode": "thresholds"}}
    return defaults | {
        "color": {"mode": "palette-classic"},
        "custom": {
            "drawStyle": "line",
            "fillOpacity": 20 if panel.stacked else 0,
            "lineWidth": 1,
            "showPoints": "never",
            "stacking": {"group": "A", "mode": "normal" if panel.stacked else "none"},
            "thresholdsStyle": {"mode": "line" if panel.limit else "off"},
        },
    }


def _panel(panel: Panel, panel_id: int, x: int, y: int) -> dict[str, Any]:
    description = panel.description
    if panel.limit:
        description += f" Red past the threshold of {panel.limit.alert} (docs/RUNBOOK.md)."
    return {
        "id": panel_id,
        "type": panel.kind,
        "title": panel.title,
        "description": description,
        "datasource": DATASOURCE,
        "gridPos": {"h": panel.height, "w": panel.width, "x": x, "y": y},
        "fieldConfig": {"defaults": _field_defaults(panel), "overrides": []},
        "options": _options(panel),
        "targets": _targets(panel),
    }


def _layout(all_rows: list[Row]) -> list[dict[str, Any]]:
    """Row headers and panels with ids and grid positions, left to right and wrapping at 24 columns."""
    panels: list[dict[str, Any]] = []
    y = 0
    for row in all_rows:
        panels.append(
            {"id": len(panels) + 1, "type": "row", "title": row.title, "collapsed": False, "panels": [],
             "gridPos": {"h": 1, "w": GRID_WIDTH, "x": 0, "y": y}}
        )  # fmt: skip
        y += 1
        x = line_height = 0
        for panel in row.panels:
            if x + panel.width > GRID_WIDTH:
                x, y, line_height = 0, y + line_height, 0
            panels.append(_panel(panel, len(panels) + 1, x, y))
            x, line_height = x + panel.width, max(line_height, panel.height)
        y += line_height
    return panels


def _variables(params: Params) -> list[dict[str, Any]]:
    selector = PromQL(params).sel("calsync_build_info")
    datasource = {
        "name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus",
        "current": {}, "hide": 0, "includeAll": False, "multi": False, "options": [], "refresh": 1, "regex": "",
    }  # fmt: skip
    scoped = [
        {
            "name": label,
            "label": label.capitalize(),
            "type": "query",
            "datasource": DATASOURCE,
            "definition": f"label_values({selector}, {label})",
            "query": f"label_values({selector}, {label})",
            "current": {},
            "hide": 0,
            "includeAll": True,
            "allValue": ".*",
            "multi": True,
            "options": [],
            "refresh": 2,
            "regex": "",
            "sort": 1,
        }
        for label in params.scope_labels
    ]
    return [datasource, *scoped]


def _annotations(params: Params) -> list[dict[str, Any]]:
    built_in = {
        "builtIn": 1, "datasource": {"type": "grafana", "uid": "-- Grafana --"}, "enable": True, "hide": True,
        "iconColor": "rgba(0, 211, 255, 1)", "name": "Annotations & Alerts", "type": "dashboard",
    }  # fmt: skip
    q = PromQL(params, filters={label: f"${label}" for label in params.scope_labels})
    deploys = {
        "name": "Deploys", "datasource": DATASOURCE, "enable": True, "hide": False, "iconColor": "purple",
        "expr": q.new_versions("10m"), "step": "1m", "tagKeys": "version",
        "titleFormat": "calsync {{version}} deployed", "textFormat": "", "useValueForTime": False,
    }  # fmt: skip
    return [built_in, deploys]


def dashboard(params: Params) -> dict[str, Any]:
    """The dashboard model Grafana imports or its sidecar provisions."""
    alert_names = ", ".join(alert.name for alert in alerts(params))
    return {
        "uid": "calsync-overview",
        "title": "calsync: sync jobs, queue and workers",
        "description": f"Generated by `python -m k8s.monitoring.generate`. Alerts: {alert_names}.",
        "tags": ["calsync"],
        "editable": True,
        "graphTooltip": 1,
        "refresh": "1m",
        "schemaVersion": SCHEMA_VERSION,
        "time": {"from": "now-6h", "to": "now"},
        "timezone": "browser",
        "version": 1,
        "annotations": {"list": _annotations(params)},
        "templating": {"list": _variables(params)},
        "links": [],
        "panels": _layout(rows(params)),
    }

"""calsync's alerting rules: the single source of prometheus-rules.yml and of the PrometheusRule manifest.

Severity policy: ``critical`` pages someone now (calendars stop updating for many users, or the alerts that
would say so are blind); ``warning`` goes to the team channel and is handled within working hours.
Each alert has a section in docs/RUNBOOK.md whose heading is the alert name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .params import Params
from .promql import PromQL, indent
from .yaml_text import Value

Severity = Literal["critical", "warning"]
# increase() extrapolates (29.7 dead letters reads better as 30); humanize would write 0.33/s as 333.3m.
COUNT = '{{ $value | printf "%.0f" }}'
RATE = '{{ $value | printf "%.2f" }}'


@dataclass(frozen=True)
class Alert:
    """One alerting rule with the annotations every calsync alert carries."""

    name: str
    expr: str
    for_: str
    severity: Severity
    summary: str
    description: str

    @property
    def anchor(self) -> str:
        """The docs/RUNBOOK.md anchor GitHub derives from a ``## <name>`` heading."""
        return self.name.lower()

    def rule(self, params: Params) -> dict[str, Value]:
        """The rule as Prometheus reads it."""
        return {
            "alert": self.name,
            "expr": self.expr,
            "for": self.for_,
            "labels": {"severity": self.severity},
            "annotations": {
                "summary": self.summary,
                "description": self.description,
                "runbook_url": f"{params.runbook_base}#{self.anchor}",
            },
        }


def duration(seconds: int) -> str:
    """900 → "15m": thresholds read the way PromQL writes durations."""
    return f"{seconds // 60}m" if seconds % 60 == 0 else f"{seconds}s"


def _where(params: Params) -> str:
    """The scope labels as text, e.g. `` (namespace {{ $labels.namespace }})``, so a message says which deployment."""
    scope = ", ".join(f"{label} {{{{ $labels.{label} }}}}" for label in params.scope_labels)
    return f" ({scope})" if scope else ""


def _compare(expr: str, op: str, threshold: float) -> str:
    """``(expr) op threshold``, parenthesised only when the expression spans several lines."""
    return f"(\n{indent(expr)}\n) {op} {threshold}" if "\n" in expr else f"{expr} {op} {threshold}"


def queue_alerts(q: PromQL) -> list[Alert]:
    """Work is piling up or waiting too long."""
    p, where = q.params, _where(q.params)
    ready = q.sel("calsync_queue_ready_messages")
    return [
        Alert(
            "CalsyncQueueBacklogRising",
            f"{_compare(q.sum(ready, 'queue'), '>', p.backlog_min_messages)}\nand\n"
            f"{_compare(q.sum(f'deriv({ready}[{p.backlog_window}])', 'queue'), '>', 0)}",
            p.backlog_window,
            "warning",
            "calsync queue {{ $labels.queue }} backlog keeps growing",
            f"{{{{ $value }}}} ready messages in queue {{{{ $labels.queue }}}}{where}, more than "
            f"{p.backlog_min_messages} and still rising over {p.backlog_window}: workers do not keep up "
            "(too few replicas, slow provider calls, or lock contention).",
        ),
        Alert(
            "CalsyncOldestMessageTooOld",
            _compare(
                q.agg("max", q.sel("calsync_queue_oldest_message_age_seconds"), "queue"),
                ">",
                p.oldest_message_max_age_s,
            ),
            "10m",
            "critical",
            "calsync queue {{ $labels.queue }} has a message waiting for {{ $value | humanizeDuration }}",
            f"The oldest ready message of queue {{{{ $labels.queue }}}}{where} became ready "
            f"{{{{ $value | humanizeDuration }}}} ago (limit {duration(p.oldest_message_max_age_s)}; a retry counts "
            "from its due time): calendar changes reach users that late.",
        ),
    ]


def job_alerts(q: PromQL) -> list[Alert]:
    """Jobs fail: for good (dead letters), in bulk (success ratio), or since a deploy (retries)."""
    p, where = q.params, _where(q.params)
    retries = q.rate("calsync_job_retries_total", p.retry_window)
    share_now = q.retry_share(p.retry_window)
    # The share in the hour before the deploy, or 0 for a deployment that ran no job then.
    share_before = f"(\n{indent(q.retry_share(p.deploy_window, offset=p.deploy_window))}\n)\nor\n0 * {retries}"
    spike = (
        f"{_compare(retries, '>', p.retry_spike_min_per_s)}\nand\n(\n{indent(share_now)}\n)\n"
        f"> {p.retry_spike_factor} * (\n{indent(share_before)}\n)"
    )
    new_versions = q.new_versions(p.deploy_window)
    scope = q.labels()
    return [
        Alert(
            "CalsyncDeadLettersGrowingFast",
            _compare(q.new_dead_letters(p.job_window, "job_type", "reason"), ">", p.dead_letter_burst),
            "5m",
            "warning",
            f"calsync dead-lettered {COUNT} {{{{ $labels.job_type }}}} jobs: {{{{ $labels.reason }}}}",
            f"{COUNT} {{{{ $labels.job_type }}}} jobs{where} were dead-lettered in the last "
            f"{p.job_window} with reason '{{{{ $labels.reason }}}}' (limit {p.dead_letter_burst}). Nothing retries "
            "them: someone must fix the cause and replay them.",
        ),
        Alert(
            "CalsyncSuccessRatioDropped",
            f"{_compare(q.success_ratio(p.job_window, 'job_type', 'provider'), '<', p.min_success_ratio)}\nand\n"
            f"{_compare(q.finished_jobs(p.job_window, 'job_type', 'provider'), '>=', p.min_finished_jobs)}",
            "10m",
            "critical",
            "calsync {{ $labels.job_type }} jobs on {{ $labels.provider }} succeed only "
            "{{ $value | humanizePercentage }} of the time",
            f"Over the last {p.job_window} only {{{{ $value | humanizePercentage }}}} of finished "
            f"{{{{ $labels.job_type }}}} attempts on provider {{{{ $labels.provider }}}}{where} succeeded "
            f"(threshold {p.min_success_ratio:.0%}; periods with fewer than {p.min_finished_jobs} finished attempts "
            f"per {p.job_window} are not judged); the rest were scheduled for retry or dead-lettered.",
        ),
        Alert(
            "CalsyncRetrySpikeAfterDeploy",
            f"(\n{indent(spike)}\n)\n* on ({scope}) group_right ()\n(\n{indent(new_versions)}\n)",
            "5m",
            "warning",
            "calsync retries jumped after version {{ $labels.version }} was deployed",
            f"Version {{{{ $labels.version }}}} started within the last {p.deploy_window}{where}, and since then "
            f"the share of attempts that end in a retry is more than {p.retry_spike_factor} times what it was "
            f"before ({RATE} retries/s over {p.retry_window}). Suspect the deploy first.",
        ),
    ]


def worker_alerts(q: PromQL) -> list[Alert]:
    """Workers are gone or stuck, or the safety net (the reconciler) does not catch lost work."""
    p, where = q.params, _where(q.params)
    return [
        Alert(
            "CalsyncWorkerHeartbeatStale",
            _compare(q.heartbeat_age(), ">", p.heartbeat_stale_after_s),
            "5m",
            "warning",
            "calsync worker {{ $labels.worker }} in pod {{ $labels.pod }} stopped renewing its heartbeat",
            f"Worker process {{{{ $labels.worker }}}}{where} last renewed its heartbeat "
            f"{{{{ $value | humanizeDuration }}}} ago (limit {duration(p.heartbeat_stale_after_s)}): a job is stuck "
            "past its time limit or the process died, and the liveness probe has not replaced the pod.",
        ),
        Alert(
            "CalsyncWorkerDown",
            f"{q.sel('up', job=p.worker_job)} == 0",
            "5m",
            "warning",
            "calsync worker pod {{ $labels.pod }} does not answer scrapes",
            f"The metrics endpoint of worker pod {{{{ $labels.pod }}}} (instance {{{{ $labels.instance }}}}){where} "
            "has not answered for 5 minutes while the pod is still a target: its processes were killed (OOM, "
            "SIGKILL) or hang. Its heartbeat series vanished with the endpoint, so CalsyncWorkerHeartbeatStale "
            "cannot fire for it.",
        ),
        Alert(
            "CalsyncNoActiveWorkers",
            f"{_compare(q.queued_messages(), '>', 0)}\nand\n{_compare(q.active_workers(), '==', 0)}",
            "5m",
            "critical",
            "calsync has {{ $value }} queued messages and no active worker",
            f"No worker process holds a live heartbeat{where} while {{{{ $value }}}} messages (ready, delayed or "
            "held by a dead worker) wait: nothing is being synced, and due retries stay in the delay queue.",
        ),
        Alert(
            "CalsyncSyncTargetsOverdue",
            _compare(q.agg("max", q.sel("calsync_sync_pending_oldest_age_seconds")), ">", p.reconcile_after_s),
            "15m",
            "warning",
            "calsync sync targets stay pending past the reconcile threshold",
            f"The most overdue pending sync target{where} is {{{{ $value | humanizeDuration }}}} past its due "
            f"time (reconcile threshold {duration(p.reconcile_after_s)}, CALSYNC_RECONCILE_AFTER): its job was "
            "lost and the reconciler has not re-enqueued it, or the re-enqueued job does not finish.",
        ),
    ]


def traffic_alerts(q: PromQL) -> list[Alert]:
    """A provider's circuit breaker stays open: its probes keep failing and its jobs wait (none is lost)."""
    state = q.agg("max", q.sel("calsync_circuit_state", scope="provider"), "provider")
    return [
        Alert(
            "CalsyncProviderCircuitOpen",
            _compare(state, ">=", 1),
            "10m",
            "warning",
            "calsync holds every {{ $labels.provider }} call: its circuit breaker stays open",
            f"The circuit breaker of provider {{{{ $labels.provider }}}}{_where(q.params)} has not closed for 10 "
            "minutes: its calls failed in a row (CALSYNC_BREAKER_FAILURES) and every probe since failed too. Its "
            "jobs wait without using attempts; nothing reaches its calendars until a probe succeeds.",
        ),
    ]


def drift_alerts(q: PromQL) -> list[Alert]:
    """Drift verification falls behind: some account's calendar has not been read back for several intervals, or
    sweeps are due and no worker claims them; drift there goes unnoticed (nothing is lost, nothing is checked)."""
    p, where = q.params, _where(q.params)
    age = q.agg("max", q.sel("calsync_drift_sweep_age_seconds"))
    overdue = q.agg("max", q.sel("calsync_drift_sweeps_overdue"))
    return [
        Alert(
            "CalsyncDriftVerificationBehind",
            f"{_compare(age, '>', p.drift_sweep_max_age_s)}\nor\n{_compare(overdue, '>', 0)}",
            "15m",
            "warning",
            "calsync drift verification is behind",
            f"Drift sweeps{where} fall behind: an account was last swept more than "
            f"{duration(p.drift_sweep_max_age_s)} ago (its sweeps fail, or traffic control holds them), or accounts "
            "are due for a sweep by more than CALSYNC_DRIFT_INTERVAL and no worker claims it (no worker runs its "
            "housekeeping pass). Edits and deletions users make in those calendars go unnoticed until sweeps catch up.",
        ),
    ]


def monitoring_alerts(q: PromQL) -> list[Alert]:
    """The exporter behind the queue alerts is down or silent: those alerts cannot fire."""
    up = q.sel("up", job=q.params.exporter_job)
    active = q.sel("calsync_workers_active")
    return [
        Alert(
            "CalsyncExporterDown",
            f"{up} == 0\nor\nabsent({up})\nor\n({up} == 1 unless on (job, instance) {active})",
            "5m",
            "critical",
            "calsync queue exporter is down or not reporting",
            f"The queue exporter (job {q.params.exporter_job}{{{{ with $labels.instance }}}}, instance {{{{ . }}}}"
            "{{ end }}) cannot be scraped, is not discovered at all, or answers without calsync metrics. The "
            "queue, worker and reconciliation alerts cannot fire until it is back.",
        ),
        Alert(
            "CalsyncExporterSourceDown",
            f"{q.agg('min', q.sel('calsync_exporter_source_up'), 'source')} == 0",
            "5m",
            "critical",
            "calsync queue exporter cannot read its {{ $labels.source }}",
            "The queue exporter cannot read its {{ $labels.source }} and leaves out the series that come from "
            "it, so the alerts built on them (queue, dead letters, sync targets, workers) cannot fire until it "
            "reads it again.",
        ),
    ]


def webhook_alerts(q: PromQL) -> list[Alert]:
    """A webhook receiver failed long enough that its breaker disabled it: its tenant hears nothing more."""
    where = _where(q.params)
    return [
        Alert(
            "CalsyncWebhookEndpointDisabled",
            _compare(q.agg("max", q.sel("calsync_webhook_endpoints_disabled", by="auto")), ">", 0),
            "5m",
            "warning",
            "calsync disabled {{ $value }} failing webhook endpoints",
            f"{{{{ $value }}}} webhook endpoints{where} failed for CALSYNC_WEBHOOK_DISABLE_AFTER and were disabled "
            "by their breaker: their tenants' services get no notifications until an operator fixes the receiver, "
            "enables the endpoint and replays its dead letters.",
        ),
    ]


def alerts(params: Params) -> list[Alert]:
    """Every calsync alert, in the order of docs/RUNBOOK.md."""
    q = PromQL(params)
    return [*queue_alerts(q), *job_alerts(q), *worker_alerts(q), *traffic_alerts(q), *webhook_alerts(q),
            *drift_alerts(q), *monitoring_alerts(q)]  # fmt: skip


def rule_groups(params: Params) -> dict[str, Value]:
    """The content of a Prometheus rules file (and of a PrometheusRule's ``spec``)."""
    return {"groups": [{"name": "calsync", "rules": [alert.rule(params) for alert in alerts(params)]}]}

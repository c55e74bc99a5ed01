"""Every metric the rules and the dashboard read is one issue 5 promises, so a misspelt name fails here."""

from __future__ import annotations

import json

from k8s.monitoring import generate
from k8s.monitoring.check import dashboard_queries
from k8s.monitoring.source import contract
from tests.monitoring.artefacts import (
    EXTRA_HISTOGRAMS,
    EXTRA_METRICS,
    ISSUE_5_HISTOGRAMS,
    ISSUE_5_METRICS,
    MONITORING,
    metric_names,
    values_of,
)

HISTOGRAM_SERIES = {h + s for h in ISSUE_5_HISTOGRAMS | EXTRA_HISTOGRAMS for s in ("_bucket", "_sum", "_count")}
ALLOWED = ISSUE_5_METRICS | EXTRA_METRICS | HISTOGRAM_SERIES


def test_the_contract_module_matches_issue_5() -> None:
    assert set(contract.METRICS) == ISSUE_5_METRICS | EXTRA_METRICS
    assert {m.name for m in contract.METRICS.values() if m.kind == "histogram"} == ISSUE_5_HISTOGRAMS | EXTRA_HISTOGRAMS


def test_alert_rules_read_only_contract_metrics() -> None:
    exprs = values_of((MONITORING / generate.RULES_FILE).read_text(), "expr")
    used = set().union(*(metric_names(expr) for expr in exprs))
    assert used - ALLOWED == set()
    assert "dramatiq_message_retries_total" not in used and "dramatiq_delayed_messages_inprogress" not in used


def test_dashboard_reads_only_contract_metrics() -> None:
    queries = dashboard_queries(json.loads((MONITORING / generate.DASHBOARD_FILE).read_text()))
    assert set().union(*(metric_names(query) for query in queries)) - ALLOWED == set()


def test_a_misspelt_metric_is_noticed() -> None:
    expr = 'sum by (job_type) (rate(calsync_job_total{job="calsync-worker",outcome=~"success|stale"}[5m] offset 1h))'
    assert metric_names(expr) == {"calsync_job_total"}
    assert metric_names("time() - calsync_worker_heartbeat_timestamp_seconds > 1.5e2") == {
        "calsync_worker_heartbeat_timestamp_seconds"
    }
    assert metric_names('absent(up{job="x"}) or vector(0) * on (instance) group_left () calsync_build_info') == {
        "up",
        "calsync_build_info",
    }

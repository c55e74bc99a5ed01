"""Reads the generated monitoring files back: where they are, their YAML values, and the PromQL inside them.

The YAML is read by layout, not with a YAML library (calsync has none): source/yaml_text.py writes it, and the
currency test guarantees the committed files have exactly that layout.
"""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MONITORING = ROOT / "k8s" / "monitoring"
PROMTOOL_TESTS = MONITORING / "tests"
RUNBOOK = ROOT / "docs" / "RUNBOOK.md"

# Issue 5's list, typed again on purpose: a typo in source/contract.py must not whitelist itself.
ISSUE_5_METRICS = {
    "calsync_jobs_total", "calsync_job_duration_seconds", "calsync_job_retries_total",
    "calsync_provider_requests_total", "calsync_provider_request_duration_seconds",
    "calsync_lock_acquisitions_total", "calsync_dead_letters_total", "calsync_worker_heartbeat_timestamp_seconds",
    "calsync_build_info", "calsync_queue_ready_messages", "calsync_queue_delayed_messages",
    "calsync_queue_inflight_messages", "calsync_queue_oldest_message_age_seconds", "calsync_dead_letters_open",
    "calsync_dead_letter_oldest_age_seconds", "calsync_sync_targets", "calsync_sync_pending_oldest_age_seconds",
    "calsync_workers_active", "up",
}  # fmt: skip
# Metrics added beyond issue 5's list (documented in docs/METRICS.md).
EXTRA_METRICS = {
    "calsync_exporter_source_up", "calsync_traffic_deferrals_total", "calsync_circuit_state",
    "calsync_circuit_accounts_not_closed", "calsync_provider_blocked_seconds", "calsync_webhook_endpoints_disabled",
    "calsync_webhook_deliveries_total", "calsync_webhook_delivery_seconds", "calsync_drift_detected_total",
    "calsync_drift_repaired_total", "calsync_drift_sweep_age_seconds", "calsync_drift_sweeps_overdue",
}  # fmt: skip
ISSUE_5_HISTOGRAMS = {"calsync_job_duration_seconds", "calsync_provider_request_duration_seconds"}
EXTRA_HISTOGRAMS = {"calsync_webhook_delivery_seconds"}

# PromQL words that are neither metric names nor followed by "(" (functions and aggregations are).
_KEYWORDS = {"and", "or", "unless", "bool", "offset", "inf", "nan"}
_LABEL_LISTS = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")


def values_of(text: str, key: str) -> list[str]:
    """Every value of ``key:`` in a generated YAML file: literal blocks dedented, quoted scalars decoded."""
    lines = text.splitlines()
    found = []
    for number, line in enumerate(lines):
        match = re.fullmatch(rf"( *)(?:- )?{re.escape(key)}: ?(.*)", line)
        if match is None:
            continue
        depth, value = len(match.group(1)), match.group(2)
        if value in ("|", "|-"):
            block = []
            for following in lines[number + 1 :]:
                if following.strip() and len(following) - len(following.lstrip(" ")) <= depth:
                    break
                block.append(following)
            found.append(textwrap.dedent("\n".join(block)) + ("\n" if value == "|" else ""))
        else:
            found.append(json.loads(value) if value.startswith('"') else value)
    return found


def spec_of(manifest: str) -> str:
    """The ``spec:`` of a generated manifest as a document of its own (a PrometheusRule's spec is a rules file)."""
    body = manifest.split("\nspec:\n", 1)[1]
    return textwrap.dedent(body)


def metric_names(expr: str) -> set[str]:
    """The metric names an expression selects (everything but strings, matchers, ranges, labels and functions)."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    text = re.sub(r"\{[^}]*\}|\[[^\]]*\]", " ", text)
    text = _LABEL_LISTS.sub(" ", text)
    text = re.sub(r"\boffset\s+\w+", " ", text)
    text = re.sub(r"\b\d+(\.\d+)?([eE][+-]?\d+)?\b", " ", text)
    names = set()
    for match in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", text):
        if match.group() not in _KEYWORDS and not text[match.end() :].lstrip().startswith("("):
            names.add(match.group())
    return names

"""Every counter an alert or panel reads has its known series at 0 from a worker process' boot (issue 35).

A series that appears only with its first increment hides that increment from ``increase()``: a burst of dead
letters in a new pod never fired CalsyncDeadLettersGrowingFast. The promtool test
k8s/monitoring/tests/dead-letters-growing-fast.yml shows both sides with Prometheus' own evaluation.
"""

from __future__ import annotations

import json

import pytest

from tests.support import python_in_a_new_process

# A fresh interpreter: the test process' own registry holds other tests' increments.
_SCRIPT = """
import json, sys
from calsync.core.drift.metrics import DRIFT_DETECTED, DRIFT_REPAIRED
from calsync.core.traffic.metrics import TRAFFIC_DEFERRALS
from calsync.core.webhooks.deliverer import DELIVERIES
from calsync.core.worker import metrics
metrics.export_zeros()
found = {}
for counter in (metrics.JOBS, metrics.JOB_RETRIES, metrics.DEAD_LETTERS, metrics.PROVIDER_REQUESTS,
                metrics.LOCK_ACQUISITIONS, TRAFFIC_DEFERRALS, DELIVERIES, DRIFT_DETECTED, DRIFT_REPAIRED):
    for family in counter.collect():
        for sample in family.samples:
            if sample.name.endswith("_total"):
                found.setdefault(sample.name, []).append([sample.labels, sample.value])
print(json.dumps(found))
"""

# One series per counter that an alert or a panel needs before its first increment.
EXPECTED = [
    ("calsync_jobs_total", {"job_type": "sync_calendar_event", "provider": "google", "outcome": "dead_lettered"}),
    ("calsync_jobs_total", {"job_type": "sync_calendar_event", "provider": "exchange", "outcome": "success"}),
    ("calsync_jobs_total", {"job_type": "deliver_webhook", "provider": "unknown", "outcome": "retry_scheduled"}),
    (
        "calsync_job_retries_total",
        {"job_type": "sync_calendar_event", "provider": "memory", "error_class": "ProviderUnavailable"},
    ),
    (
        "calsync_job_retries_total",
        {"job_type": "sync_calendar_event", "provider": "google", "error_class": "TimeLimitExceeded"},
    ),
    ("calsync_dead_letters_total", {"job_type": "sync_calendar_event", "reason": "needs re-authorization"}),
    ("calsync_dead_letters_total", {"job_type": "sync_calendar_event", "reason": "retries exhausted"}),
    ("calsync_dead_letters_total", {"job_type": "submit_change", "reason": "invalid payload"}),
    ("calsync_provider_requests_total", {"provider": "exchange", "operation": "delete", "status_class": "ok"}),
    ("calsync_lock_acquisitions_total", {"result": "busy"}),
    ("calsync_traffic_deferrals_total", {"provider": "graph", "limit": "account_circuit"}),
    ("calsync_traffic_deferrals_total", {"provider": "google", "limit": "concurrency"}),
    ("calsync_webhook_deliveries_total", {"outcome": "exhausted", "status_class": "5xx"}),
    ("calsync_webhook_deliveries_total", {"outcome": "retry_scheduled", "status_class": "timeout"}),
    ("calsync_drift_detected_total", {"provider": "google", "kind": "deleted_externally"}),
    ("calsync_drift_detected_total", {"provider": "graph", "kind": "unknown_item"}),
    ("calsync_drift_repaired_total", {"provider": "exchange", "kind": "modified_externally"}),
]


@pytest.fixture(scope="module")
def zero_series() -> dict[str, list[list[object]]]:
    found: dict[str, list[list[object]]] = json.loads(python_in_a_new_process(_SCRIPT))
    return found


@pytest.mark.parametrize(("name", "labels"), EXPECTED, ids=[f"{n}-{'-'.join(v.values())}" for n, v in EXPECTED])
def test_a_counter_series_exists_at_zero_before_its_first_increment(
    zero_series: dict[str, list[list[object]]], name: str, labels: dict[str, str]
) -> None:
    assert [labels, 0.0] in zero_series.get(name, []), f"{name}{labels} is not exported at 0 at boot"


def test_the_zero_series_stay_bounded(zero_series: dict[str, list[list[object]]]) -> None:
    counts = {name: len(series) for name, series in zero_series.items()}
    print(counts)
    assert sum(counts.values()) < 500, counts

"""The dashboard's PromQL parses, its panels cover the contract's metrics, and its layout is sound."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from k8s.monitoring import generate
from k8s.monitoring.check import as_plain_promql, dashboard_queries
from k8s.monitoring.source.dashboard import GRID_WIDTH
from tests.monitoring.artefacts import (
    EXTRA_METRICS,
    ISSUE_5_METRICS,
    MONITORING,
    metric_names,
)
from tests.monitoring.conftest import Promtool


@pytest.fixture(scope="module")
def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((MONITORING / generate.DASHBOARD_FILE).read_text())
    return loaded


def test_promtool_parses_every_dashboard_query(promtool: Promtool, dashboard: dict[str, Any], tmp_path: Path) -> None:
    queries = dashboard_queries(dashboard)
    rules = ["groups:", "- name: dashboard", "  rules:"]
    for number, query in enumerate(queries):
        rules += [f"  - record: dashboard:query_{number}", "    expr: |-"]
        rules += [f"      {line}" for line in as_plain_promql(query).split("\n")]
    (tmp_path / "dashboard-queries.yml").write_text("\n".join(rules) + "\n")
    done = promtool("check", "rules", "dashboard-queries.yml", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(queries)} rules found" in done.stdout


def test_every_contract_metric_is_charted(dashboard: dict[str, Any]) -> None:
    charted = set().union(*(metric_names(q) for q in dashboard_queries(dashboard)))
    families = {name.removesuffix("_bucket") for name in charted}
    assert (ISSUE_5_METRICS | EXTRA_METRICS) - {"up"} <= families  # the traffic metrics have panels too
    durations = [q for q in dashboard_queries(dashboard) if "calsync_job_duration_seconds_bucket" in q]
    assert {q.split(",")[0] for q in durations} == {f"histogram_quantile({q}" for q in ("0.5", "0.95", "0.99")}


def test_panels_have_unique_ids_and_do_not_overlap(dashboard: dict[str, Any]) -> None:
    panels = dashboard["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    cells: set[tuple[int, int]] = set()
    for panel in panels:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= GRID_WIDTH, panel["title"]
        mine = {
            (x, y) for x in range(grid["x"], grid["x"] + grid["w"]) for y in range(grid["y"], grid["y"] + grid["h"])
        }
        assert not mine & cells, f"{panel['title']} overlaps another panel"
        cells |= mine


def test_panels_use_the_datasource_variable(dashboard: dict[str, Any]) -> None:
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["namespace"]["allValue"] == ".*"
    for panel in dashboard["panels"]:
        if panel["type"] != "row":
            assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
            assert panel["description"] and panel["targets"], panel["title"]
            assert all('namespace=~"$namespace"' in t["expr"] for t in panel["targets"]), panel["title"]

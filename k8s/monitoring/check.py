"""Checks a running Prometheus against calsync's shipped monitoring: ``python -m k8s.monitoring.check URL``.

It asks the Prometheus at URL (its HTTP API, read-only) whether every shipped alert is loaded and evaluates
without error, whether any alert fires now, and whether every query of the shipped dashboard answers with
series (Grafana's variables replaced by "any"). tests/monitoring/test_live_prometheus.py runs the same checks
against a Prometheus of its own; docs/METRICS.md says how to rehearse the alerts themselves.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from typing import Any

from .generate import DASHBOARD_FILE, HERE
from .source.alerts import alerts
from .source.params import DEFAULTS


def dashboard_queries(node: Any) -> list[str]:
    """Every PromQL expression in a dashboard: targets, annotations, and the selectors of label_values() variables."""
    if isinstance(node, list):
        return [query for item in node for query in dashboard_queries(item)]
    if not isinstance(node, dict):
        return []
    found = [node["expr"]] if isinstance(node.get("expr"), str) else []
    query = node.get("query")
    if isinstance(query, str) and query.startswith("label_values("):
        found.append(query.removeprefix("label_values(").rsplit(",", 1)[0])
    return found + [q for key, value in node.items() if key != "expr" for q in dashboard_queries(value)]


def as_plain_promql(expr: str) -> str:
    """A dashboard expression with Grafana's variables replaced (ranges by 5m, the others by any value)."""
    return re.sub(r"\$\{?\w+\}?", ".*", re.sub(r"\$__\w+", "5m", expr))


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as answer:
        return json.loads(answer.read())


def query(url: str, expr: str) -> list[Any]:
    """An instant query's result; raises ValueError with Prometheus' message when it refuses the query."""
    try:
        answer = _get(f"{url}/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
    except urllib.error.HTTPError as exc:
        raise ValueError(json.loads(exc.read()).get("error", str(exc))) from None
    return list(answer["data"]["result"])


def rule_problems(url: str, names: Sequence[str] | None = None) -> list[str]:
    """Shipped alerts that the Prometheus does not have, or whose last evaluation failed."""
    loaded = {
        rule["name"]: rule
        for group in _get(f"{url}/api/v1/rules?type=alert")["data"]["groups"]
        for rule in group["rules"]
    }
    problems = []
    for name in names or [alert.name for alert in alerts(DEFAULTS)]:
        rule = loaded.get(name)
        if rule is None:
            problems.append(f"alert {name} is not loaded")
        elif rule.get("health") == "err":
            problems.append(f"alert {name} fails to evaluate: {rule.get('lastError')}")
    return problems


def panel_problems(url: str) -> list[str]:
    """Dashboard queries that Prometheus refuses or that return no series."""
    problems = []
    for expr in dashboard_queries(json.loads((HERE / DASHBOARD_FILE).read_text(encoding="utf-8"))):
        try:
            if not query(url, as_plain_promql(expr)):
                problems.append(f"no data: {expr}")
        except ValueError as exc:
            problems.append(f"error {exc}: {expr}")
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    """Command-line entry point: prints each problem; exit 1 when there is one."""
    parser = argparse.ArgumentParser(prog="python -m k8s.monitoring.check", description=__doc__.split("\n")[0])
    parser.add_argument("url", help="the Prometheus base URL, e.g. http://localhost:9090")
    url = parser.parse_args(argv).url.rstrip("/")
    problems = rule_problems(url) + panel_problems(url)
    firing = sorted({a["labels"]["alertname"] for a in _get(f"{url}/api/v1/alerts")["data"]["alerts"]
                     if a["state"] == "firing" and a["labels"]["alertname"].startswith("Calsync")})  # fmt: skip
    print("\n".join(problems or ["every shipped alert is loaded and every dashboard query has data"]))
    print(f"firing now: {', '.join(firing) or 'nothing'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

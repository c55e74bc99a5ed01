"""promtool accepts the rules in both shapes, and its unit tests show every alert firing and staying silent."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from k8s.monitoring import generate
from k8s.monitoring.source.alerts import alerts
from k8s.monitoring.source.params import DEFAULTS
from tests.monitoring.artefacts import MONITORING, PROMTOOL_TESTS, spec_of
from tests.monitoring.conftest import Promtool


@pytest.fixture(params=["rules-file", "prometheus-rule"])
def rules_dir(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """A directory with prometheus-rules.yml and the promtool tests in tests/: committed, or from the CRD's spec."""
    if request.param == "rules-file":
        return MONITORING
    spec = spec_of((MONITORING / generate.PROMETHEUS_RULE_FILE).read_text())
    (tmp_path / generate.RULES_FILE).write_text(spec)
    shutil.copytree(PROMTOOL_TESTS, tmp_path / "tests")
    return tmp_path


def test_promtool_accepts_the_rules(promtool: Promtool, rules_dir: Path) -> None:
    done = promtool("check", "rules", "--lint=all", "--lint-fatal", generate.RULES_FILE, cwd=rules_dir)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(alerts(DEFAULTS))} rules found" in done.stdout


def test_promtool_unit_tests_pass(promtool: Promtool, rules_dir: Path) -> None:
    files = sorted(path.name for path in (rules_dir / "tests").glob("*.yml"))
    done = promtool("test", "rules", *files, cwd=rules_dir / "tests")
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("alert", [alert.name for alert in alerts(DEFAULTS)])
def test_every_alert_is_tested_firing_and_silent(alert: str) -> None:
    text = "\n".join(path.read_text() for path in PROMTOOL_TESTS.glob("*.yml"))
    assert re.search(rf"alertname: {alert}\n +exp_alerts:\n +- exp_labels:", text), f"no case where {alert} fires"
    assert re.search(rf"alertname: {alert}\n +exp_alerts: \[\]", text), f"no case where {alert} stays silent"


def test_the_readme_counts_the_alerts() -> None:
    readme = (MONITORING / "README.md").read_text()
    assert f"`source/alerts.py`: the alerts ({len(alerts(DEFAULTS))})" in readme

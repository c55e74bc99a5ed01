"""The committed monitoring files are what the source generates, and they carry what Kubernetes needs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from k8s.monitoring import generate
from k8s.monitoring.source.alerts import alerts
from k8s.monitoring.source.params import DEFAULTS
from tests.monitoring.artefacts import MONITORING, RUNBOOK, values_of


def _github_anchor(heading: str) -> str:
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_generated_files_are_current() -> None:
    assert generate.stale_files() == [], "run: python -m k8s.monitoring.generate"


def test_every_alert_has_severity_annotations_and_a_runbook_section() -> None:
    text = (MONITORING / generate.RULES_FILE).read_text()
    anchors = {_github_anchor(h) for h in re.findall(r"^#{2,3} (.+)$", RUNBOOK.read_text(), re.M)}
    names = values_of(text, "alert")
    assert names == [alert.name for alert in alerts(DEFAULTS)]
    assert len(values_of(text, "severity")) == len(names)
    assert set(values_of(text, "severity")) <= {"critical", "warning"}
    for key in ("expr", "for", "summary", "description"):
        assert len(values_of(text, key)) == len(names), key
    for name, url in zip(names, values_of(text, "runbook_url"), strict=True):
        assert url == f"docs/RUNBOOK.md#{name.lower()}"
        assert name.lower() in anchors, f"docs/RUNBOOK.md has no section '## {name}'"


def test_prometheus_rule_carries_the_release_label_and_the_same_groups() -> None:
    manifest = (MONITORING / generate.PROMETHEUS_RULE_FILE).read_text()
    assert "\napiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\n" in manifest
    assert values_of(manifest, "release") == [DEFAULTS.release]
    plain = (MONITORING / generate.RULES_FILE).read_text()
    assert values_of(manifest, "expr") == values_of(plain, "expr")


def test_configmap_holds_the_dashboard_for_the_grafana_sidecar() -> None:
    configmap = (MONITORING / generate.DASHBOARD_CONFIGMAP_FILE).read_text()
    assert "\napiVersion: v1\nkind: ConfigMap\n" in configmap
    assert values_of(configmap, "grafana_dashboard") == ["1"]
    assert '  grafana_dashboard: "1"\n' in configmap  # a string: the sidecar's label selector compares text
    embedded = values_of(configmap, generate.DASHBOARD_KEY)
    assert embedded == [(MONITORING / generate.DASHBOARD_FILE).read_text()]


def test_parameters_go_to_another_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    variant = ["--release", "prometheus", "--reconcile-after-s", "900"]
    assert generate.main(variant) == 2
    assert "--out" in capsys.readouterr().err
    assert generate.main([*variant, "--out", str(tmp_path)]) == 0
    assert values_of((tmp_path / generate.PROMETHEUS_RULE_FILE).read_text(), "release") == ["prometheus"]
    assert "> 900" in (tmp_path / generate.RULES_FILE).read_text()
    assert generate.main(["--check", *variant, "--out", str(tmp_path)]) == 0
    assert generate.main(["--check", "--out", str(tmp_path)]) == 1

"""The PrometheusRule as deployed (after kustomize) is a valid rules file and passes the alerts' promtool unit tests.

tests/monitoring checks the generated files; this checks what each overlay actually renders, so a kustomize
patch or transformer that mangled an expression, a `for:` or a label would fail here.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from tests.deploy.conftest import Tool
from tests.deploy.manifests import K8S, Manifests

PROMTOOL_TESTS = K8S / "monitoring" / "tests"


def _extract_rules(overlay: Manifests, directory: Path) -> Path:
    """promtool cannot read a PrometheusRule; its spec (the `groups:` list) is exactly a rules file."""
    (rule,) = overlay.of_kind("PrometheusRule")
    path = directory / "rules.yml"
    path.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}, sort_keys=False))
    return path


def _distinct_rules(rendered: dict[str, Manifests]) -> dict[str, Manifests]:
    """One overlay per distinct rendered rule set (the unit tests take seconds; identical rules need one run)."""
    seen: dict[str, Manifests] = {}
    for manifests in rendered.values():
        (rule,) = manifests.of_kind("PrometheusRule")
        seen.setdefault(json.dumps(rule["spec"], sort_keys=True), manifests)
    return seen


def test_promtool_accepts_the_rendered_rules(overlay: Manifests, promtool: Tool, tmp_path: Path) -> None:
    rules = _extract_rules(overlay, tmp_path)
    done = promtool("check", "rules", "--lint=all", "--lint-fatal", rules)
    assert done.returncode == 0, done.stdout + done.stderr
    count = sum(len(group["rules"]) for group in yaml.safe_load(rules.read_text())["groups"])
    assert f"SUCCESS: {count} rules found" in done.stdout


def test_promtool_unit_tests_pass_on_the_rendered_rules(
    rendered: dict[str, Manifests], promtool: Tool, tmp_path: Path
) -> None:
    tests = sorted(PROMTOOL_TESTS.glob("*.yml"))
    assert tests, f"no promtool tests in {PROMTOOL_TESTS}"
    for index, overlay in enumerate(_distinct_rules(rendered).values()):
        directory = tmp_path / str(index)
        directory.mkdir()
        rules = _extract_rules(overlay, directory)
        for source in tests:
            test = yaml.safe_load(source.read_text())
            test["rule_files"] = [str(rules)]
            (directory / source.name).write_text(yaml.safe_dump(test, sort_keys=False))
        done = promtool("test", "rules", *(directory / source.name for source in tests))
        assert done.returncode == 0, f"{overlay.overlay}:\n{done.stdout}{done.stderr}"

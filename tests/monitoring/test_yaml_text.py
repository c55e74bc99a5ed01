"""The generated files' YAML writer quotes what a YAML reader would otherwise take for something else."""

from __future__ import annotations

import pytest

from k8s.monitoring.source.yaml_text import Value, dump


@pytest.mark.parametrize(
    ("value", "written"),
    [
        ("15m", "15m"),
        ("calsync-worker", "calsync-worker"),
        ("1", '"1"'),
        ("yes", '"yes"'),
        ("Off", '"Off"'),
        ("1e3", '"1e3"'),
        ("a: b", '"a: b"'),
        ("", '""'),
        ("#x", '"#x"'),
        (0.9, "0.9"),
        (True, "true"),
        (20, "20"),
    ],
)
def test_scalars(value: str | float | bool, written: str) -> None:
    assert dump({"k": value}) == f"k: {written}\n"


def test_promql_and_multi_line_text_are_literal_blocks() -> None:
    assert dump({"expr": 'up{job="x"} == 0'}) == 'expr: |-\n  up{job="x"} == 0\n'
    assert dump({"a": ["x", "y\nz\n", ["w"]]}) == "a:\n- x\n- |\n    y\n    z\n-\n  - w\n"


def test_nesting_and_header() -> None:
    data: dict[str, Value] = {
        "groups": [{"name": "g", "rules": [{"alert": "A", "labels": {"severity": "warning"}}]}],
        "e": {},
    }
    assert dump(data, "made\nby us") == (
        "# made\n# by us\ngroups:\n- name: g\n  rules:\n  - alert: A\n    labels:\n      severity: warning\ne: {}\n"
    )

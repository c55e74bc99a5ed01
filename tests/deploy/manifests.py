"""Reading rendered kustomize output: the overlays, their objects, and the calsync settings they configure."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from calsync.core.config.settings import ENV_PREFIX, Settings, load_settings

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "k8s"
OVERLAYS = {path.name: path for path in sorted((K8S / "overlays").iterdir()) if (path / "kustomization.yaml").exists()}
CORE_API_GROUPS = {"v1", "apps/v1", "batch/v1", "policy/v1", "networking.k8s.io/v1", "autoscaling/v2"}
CRD_KINDS = {"ScaledObject", "TriggerAuthentication", "ServiceMonitor", "PodMonitor", "PrometheusRule"}
WORKLOAD_KINDS = {"Deployment", "Job", "CronJob"}
CONFIG_MAP = "calsync-config"
SECRET_SETTINGS = {"CALSYNC_BROKER_URL", "CALSYNC_REDIS_URL", "CALSYNC_DATABASE_URL", "CALSYNC_SECRET_KEY"}

Obj = dict[str, Any]


def parse_documents(text: str) -> list[Obj]:
    """The objects of a multi-document YAML stream, empty documents dropped."""
    return [doc for doc in yaml.safe_load_all(text) if doc]


def pod_spec(obj: Obj) -> Obj:
    """The pod spec inside a Deployment, Job or CronJob."""
    if obj["kind"] == "CronJob":
        return dict(obj["spec"]["jobTemplate"]["spec"]["template"]["spec"])
    return dict(obj["spec"]["template"]["spec"])


def pod_labels(obj: Obj) -> dict[str, str]:
    """The labels a workload's pods get."""
    template = obj["spec"]["jobTemplate"]["spec"]["template"] if obj["kind"] == "CronJob" else obj["spec"]["template"]
    return dict(template["metadata"].get("labels", {}))


def option(args: list[str], name: str) -> str | None:
    """The value after ``name`` in a command line (``--processes 2``), or None."""
    for index, arg in enumerate(args[:-1]):
        if arg == name:
            return args[index + 1]
    return None


@dataclass(frozen=True)
class Manifests:
    """The objects one overlay renders to."""

    overlay: str
    objects: list[Obj]

    def of_kind(self, kind: str) -> list[Obj]:
        """Every object of a kind."""
        return [obj for obj in self.objects if obj["kind"] == kind]

    def get(self, kind: str, name: str) -> Obj:
        """The object of that kind and name (fails when absent or ambiguous)."""
        found = [obj for obj in self.of_kind(kind) if obj["metadata"]["name"] == name]
        assert len(found) == 1, f"{self.overlay}: expected one {kind}/{name}, found {len(found)}"
        return found[0]

    def workloads(self) -> Iterator[Obj]:
        """Deployments, Jobs and CronJobs."""
        return (obj for obj in self.objects if obj["kind"] in WORKLOAD_KINDS)

    def config(self) -> dict[str, str]:
        """The CALSYNC_* values of the generated calsync-config ConfigMap (name carries a hash suffix)."""
        found = [
            obj for obj in self.of_kind("ConfigMap") if obj["metadata"]["name"].startswith(CONFIG_MAP + "-")
        ]  # fmt: skip
        assert len(found) == 1, f"{self.overlay}: expected one generated {CONFIG_MAP} ConfigMap"
        return dict(found[0]["data"])

    def settings(self) -> Settings:
        """The settings a deployed process builds from the ConfigMap (code defaults for what it leaves out)."""
        values = {}
        for key, value in self.config().items():
            assert key.startswith(ENV_PREFIX), f"{self.overlay}: {CONFIG_MAP} key {key} is not a CALSYNC_ setting"
            values[key.removeprefix(ENV_PREFIX).lower()] = value
        return load_settings(**values)

    def container(self, kind: str, name: str, container: str | None = None) -> Obj:
        """A workload's container (its only one unless named)."""
        containers = pod_spec(self.get(kind, name))["containers"]
        if container is None:
            assert len(containers) == 1, f"{self.overlay}: {kind}/{name} has several containers"
            return dict(containers[0])
        return next(dict(c) for c in containers if c["name"] == container)

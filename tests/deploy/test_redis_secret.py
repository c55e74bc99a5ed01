"""One Secret for the Redis password: every pod builds ``CALSYNC_BROKER_URL`` from ``calsync-redis-auth``, the
Secret KEDA's TriggerAuthentication reads, so rotating the password is one Secret update and a roll-out."""

from __future__ import annotations

import re
from typing import Any

from calsync.core.config.settings import Settings, broker_kind
from tests.deploy.manifests import Manifests, pod_spec

SECRET = "calsync-redis-auth"
SCHEMES = {"dev": "redis", "prod": "rediss", "prod-hpa": "rediss"}


def _expanded(value: str, known: dict[str, str]) -> str:
    """Kubernetes' $(VAR) expansion: only variables defined earlier in the list are replaced."""
    return re.sub(r"\$\((\w+)\)", lambda m: known.get(m.group(1), m.group(0)), value)


def _scheme(overlay: Manifests, ref: dict[str, Any]) -> str:
    [config] = [c for c in overlay.of_kind("ConfigMap") if c["metadata"]["name"] == ref["name"]]
    return str(config["data"][ref["key"]])


def test_every_pod_builds_the_broker_url_from_the_secret_keda_reads(overlay: Manifests) -> None:
    for workload in overlay.workloads():
        for container in pod_spec(workload)["containers"]:
            known: dict[str, str] = {}
            secret_keys: set[str] = set()
            url = None
            for variable in container.get("env", []):
                source = variable.get("valueFrom", {})
                if "secretKeyRef" in source:
                    assert source["secretKeyRef"]["name"] == SECRET, variable
                    secret_keys.add(source["secretKeyRef"]["key"])
                    known[variable["name"]] = {"password": "hex0123", "address": "redis.internal:6380"}[
                        source["secretKeyRef"]["key"]]  # fmt: skip
                elif "configMapKeyRef" in source:
                    known[variable["name"]] = _scheme(overlay, source["configMapKeyRef"])
                elif variable["name"] == "CALSYNC_BROKER_URL":
                    url = _expanded(variable["value"], known)
            where = f"{overlay.overlay}: {workload['metadata']['name']}"
            assert secret_keys == {"password", "address"}, where
            assert url == f"{SCHEMES[overlay.overlay]}://:hex0123@redis.internal:6380/0", where
            assert broker_kind(Settings(broker_url=url).broker_url or "") == "redis"


def test_keda_reads_the_same_secret_and_keys(overlay: Manifests) -> None:
    for auth in overlay.of_kind("TriggerAuthentication"):
        refs = {
            (r["name"], r["key"]) for r in auth["spec"]["secretTargetRef"] if r["parameter"] in ("address", "password")
        }
        assert refs == {(SECRET, "address"), (SECRET, "password")}

"""Every overlay renders offline and every object in it is valid for its API: strict core schemas, CRD models."""

from __future__ import annotations

import copy
import re
from types import ModuleType
from typing import Any

import pytest
import yaml

from tests.deploy.manifests import CORE_API_GROUPS, CRD_KINDS, K8S, OVERLAYS, Manifests

# The oldest Kubernetes release the manifests support (CronJob timeZone and the PDB's unhealthyPodEvictionPolicy
# are GA there) and the newest kubernetes-validate bundles: a field removed or renamed in between fails one.
KUBERNETES_VERSIONS = ("1.31.0", "1.37.0")


def unknown_fields(given: Any, dumped: Any, path: str = "") -> list[str]:
    """Paths present in ``given`` but lost by the model round-trip: fields the CRD schema does not know."""
    if isinstance(given, dict):
        if not isinstance(dumped, dict):
            return [f"{path} (not an object in the schema)"]
        found = []
        for key, value in given.items():
            if key not in dumped:
                found.append(f"{path}.{key}")
            else:
                found.extend(unknown_fields(value, dumped[key], f"{path}.{key}"))
        return found
    if isinstance(given, list):
        if not isinstance(dumped, list) or len(given) != len(dumped):
            return [f"{path} (list changed shape)"]
        return [
            p for i, (a, b) in enumerate(zip(given, dumped, strict=True)) for p in unknown_fields(a, b, f"{path}[{i}]")
        ]
    return [] if given == dumped else [f"{path} ({given!r} became {dumped!r})"]


def crd_problems(models: dict[str, Any], obj: dict[str, Any]) -> list[str]:
    """Validation errors or unknown fields of a CRD object, as readable strings (empty when it is valid)."""
    from pydantic import ValidationError

    try:
        model = models[obj["kind"]].model_validate(obj)
    except ValidationError as exc:
        return [str(exc)]
    return unknown_fields(obj, model.model_dump(mode="json", by_alias=True, exclude_unset=True))


def test_every_overlay_renders(rendered: dict[str, Manifests]) -> None:
    assert set(rendered) == {"dev", "prod", "prod-hpa"}
    for manifests in rendered.values():
        assert manifests.objects, f"{manifests.overlay} rendered nothing"


def test_kustomizations_fetch_nothing() -> None:
    """Every resource, component and patch is a local path, so rendering never needs the network."""
    files = sorted(K8S.rglob("kustomization.yaml"))
    assert len(files) >= len(OVERLAYS) + 3
    for path in files:
        text = path.read_text()
        assert not re.search(r"https?://|github\.com|\?ref=", text), f"{path} references a remote resource"
        doc = yaml.safe_load(text)
        for key in ("resources", "components"):
            for entry in doc.get(key, []):
                assert (path.parent / entry).exists(), f"{path}: {key} entry {entry} does not exist"


def test_every_object_is_either_core_or_a_known_crd(overlay: Manifests) -> None:
    for obj in overlay.objects:
        core = obj["apiVersion"] in CORE_API_GROUPS
        assert core != (obj["kind"] in CRD_KINDS), (
            f"{overlay.overlay}: {obj['apiVersion']} {obj['kind']} is unvalidated"
        )


def test_objects_sit_in_the_overlay_namespace(overlay: Manifests) -> None:
    namespaces = overlay.of_kind("Namespace")
    assert len(namespaces) == 1
    expected = namespaces[0]["metadata"]["name"]
    for obj in overlay.objects:
        if obj["kind"] != "Namespace":
            assert obj["metadata"].get("namespace") == expected, f"{obj['kind']}/{obj['metadata']['name']}"


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_core_objects_pass_strict_schema_validation(
    overlay: Manifests, kubernetes_validate: ModuleType, version: str
) -> None:
    """kubernetes-validate --strict: unknown fields (typos) fail, not only wrong types."""
    failures = []
    for obj in overlay.objects:
        if obj["kind"] in CRD_KINDS:
            continue
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            failures.append(f"{obj['kind']}/{obj['metadata']['name']}: {exc.message} at {list(exc.path)}")
    assert not failures, f"{overlay.overlay} on Kubernetes {version}:\n" + "\n".join(failures)


def test_strict_validation_catches_a_misspelled_field(
    rendered: dict[str, Manifests], kubernetes_validate: ModuleType
) -> None:
    worker = copy.deepcopy(rendered["prod"].get("Deployment", "calsync-worker"))
    worker["spec"]["template"]["spec"]["containers"][0]["imagePullPolcy"] = "Always"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(worker, KUBERNETES_VERSIONS[0], strict=True)


def test_crd_objects_match_their_schemas(overlay: Manifests, crd_models: dict[str, Any]) -> None:
    """KEDA and Prometheus Operator objects validate, and the round-trip through the model loses no field."""
    checked = 0
    for obj in overlay.objects:
        if obj["kind"] in CRD_KINDS:
            problems = crd_problems(crd_models, obj)
            assert not problems, f"{overlay.overlay}: {obj['kind']}/{obj['metadata']['name']}: {problems}"
            checked += 1
    assert checked >= 3


@pytest.mark.parametrize(
    ("kind", "name", "path", "typo"),
    [
        ("ScaledObject", "calsync-worker", ["spec"], "minReplicaCont"),
        ("ServiceMonitor", "calsync-exporter", ["spec", "endpoints", 0], "intervall"),
        ("PodMonitor", "calsync-worker", ["spec"], "joblabel"),
        ("TriggerAuthentication", "calsync-redis-auth", ["spec", "secretTargetRef", 0], "parametr"),
        ("PrometheusRule", "calsync", ["spec", "groups", 0, "rules", 0], "fro"),
    ],
)
def test_crd_check_catches_a_misspelled_field(
    rendered: dict[str, Manifests], crd_models: dict[str, Any], kind: str, name: str, path: list[Any], typo: str
) -> None:
    obj = copy.deepcopy(rendered["prod"].get(kind, name))
    node: Any = obj
    for step in path:
        node = node[step]
    node[typo] = "x"
    assert crd_problems(crd_models, obj), f"a misspelled {typo!r} in {kind} went unnoticed"

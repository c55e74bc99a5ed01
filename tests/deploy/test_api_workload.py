"""The `calsync serve` Deployment, Service, PDB, NetworkPolicy and ServiceMonitor, read against the application.

Each test names what would break: a probe on a path the app does not serve restarts every pod; a liveness probe
on /readyz restarts every pod during a database outage; several server processes per pod would split /metrics.
"""

from __future__ import annotations

from calsync.core.api.app import create_app
from tests.deploy.manifests import Manifests, option, pod_labels

API = "calsync-api"


def _paths() -> set[str]:
    return set(create_app(None).openapi()["paths"])


def test_api_runs_one_server_process_per_pod_on_the_configured_port(overlay: Manifests) -> None:
    container = overlay.container("Deployment", API)
    assert container["args"][0] == "serve"
    assert option(container["args"], "--workers") == "1", "scale with replicas; /metrics is per process"
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"http": overlay.settings().api_port}


def test_probes_hit_paths_the_application_serves(overlay: Manifests) -> None:
    container = overlay.container("Deployment", API)
    probes = {name: container[name]["httpGet"] for name in ("startupProbe", "livenessProbe", "readinessProbe")}
    assert {probe["port"] for probe in probes.values()} == {"http"}
    assert probes["livenessProbe"]["path"] == "/healthz", "liveness must not depend on the database"
    assert probes["readinessProbe"]["path"] == "/readyz"
    assert {probe["path"] for probe in probes.values()} <= _paths()


def test_service_and_budget_select_the_api_pods(overlay: Manifests) -> None:
    deployment = overlay.get("Deployment", API)
    labels = pod_labels(deployment)
    service = overlay.get("Service", API)
    assert service["spec"]["selector"].items() <= labels.items()
    assert [p["targetPort"] for p in service["spec"]["ports"]] == ["http"]
    pdb = overlay.get("PodDisruptionBudget", API)
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert pdb["spec"]["maxUnavailable"] == 1 and "minAvailable" not in pdb["spec"]
    assert deployment["spec"]["replicas"] > pdb["spec"]["maxUnavailable"], "a drain would take the API down"


def test_only_the_api_port_is_opened_and_only_on_api_pods(overlay: Manifests) -> None:
    policy = overlay.get("NetworkPolicy", API)
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= pod_labels(overlay.get("Deployment", API)).items()
    assert policy["spec"]["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": API}
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    assert {p["port"] for rule in policy["spec"]["ingress"] for p in rule["ports"]} == {"http"}


def test_prometheus_scrapes_the_api_metrics(overlay: Manifests) -> None:
    monitor = overlay.get("ServiceMonitor", API)["spec"]
    service = overlay.get("Service", API)
    assert monitor["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert [(e["port"], e["path"]) for e in monitor["endpoints"]] == [("http", "/metrics")]
    assert "/metrics" in {getattr(route, "path", None) for route in create_app(None).routes}
    assert service["metadata"]["labels"][monitor["jobLabel"]] == API

"""The rendered overlays keep the properties calsync relies on in production, read against the code's own settings.

Each test names what would break: a worker without its liveness probe is never restarted when a thread is
stuck; without an explicit --processes it forks one process per node CPU; a KEDA list name that drifts from
the broker's keys scales on an always-empty list.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from calsync.core.config.settings import Settings
from calsync.core.redis.keys import RedisKeys
from tests.deploy.manifests import CONFIG_MAP, K8S, SECRET_SETTINGS, Manifests, option, pod_labels, pod_spec
from tests.support import probe_command

WORKER = "calsync-worker"
EXPORTER = "calsync-exporter"
# Dramatiq exits about 2.5 s after its shutdown timeout (requeueing prefetched and delayed messages, measured
# with Dramatiq 2.2); the rest is slack for a slow node.
DRAIN_MARGIN_S = 10


def _probe_max_age(command: list[str]) -> int:
    match = re.search(r"-lt (\d+) \]", command[-1])
    assert match, f"no age limit in the heartbeat probe {command}"
    return int(match.group(1))


def _mounts(pod: dict[str, Any], container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Mount path → volume, for the container's mounts."""
    volumes = {volume["name"]: volume for volume in pod.get("volumes", [])}
    return {mount["mountPath"]: volumes[mount["name"]] for mount in container.get("volumeMounts", [])}


def _on_empty_dir(path: Path, mounts: dict[str, dict[str, Any]]) -> bool:
    return any(path.is_relative_to(mount) and "emptyDir" in volume for mount, volume in mounts.items())


# --- worker ------------------------------------------------------------------------------------------------


def test_worker_has_explicit_processes_and_threads(overlay: Manifests) -> None:
    """Dramatiq's default --processes is the node's CPU count, whatever the container's limit."""
    args = overlay.container("Deployment", WORKER)["args"]
    assert args[0] == "worker"
    for flag in ("--processes", "--threads"):
        value = option(args, flag)
        assert value is not None and value.isdigit() and int(value) >= 1, f"{overlay.overlay}: worker needs {flag} N"


def test_worker_replicas_belong_to_the_autoscaler(overlay: Manifests) -> None:
    worker = overlay.get("Deployment", WORKER)
    assert "replicas" not in worker["spec"], "spec.replicas would reset the autoscaler's count on every apply"
    scalers = [
        obj for obj in overlay.of_kind("ScaledObject") + overlay.of_kind("HorizontalPodAutoscaler")
        if obj["spec"]["scaleTargetRef"]["name"] == WORKER
    ]  # fmt: skip
    assert len(scalers) == 1, f"{overlay.overlay}: the worker needs exactly one autoscaler, has {len(scalers)}"


def test_worker_drains_before_it_is_killed(overlay: Manifests) -> None:
    grace = pod_spec(overlay.get("Deployment", WORKER))["terminationGracePeriodSeconds"]
    shutdown = overlay.settings().worker_shutdown_timeout
    assert grace >= shutdown + DRAIN_MARGIN_S, f"{overlay.overlay}: TGPS {grace}s vs shutdown timeout {shutdown}s"


def test_worker_liveness_probe_checks_the_heartbeat_files(overlay: Manifests) -> None:
    """The exec probe is core.worker.heartbeat's own script, on the directory the workers write, on a volume."""
    settings = overlay.settings()
    worker = overlay.get("Deployment", WORKER)
    container = overlay.container("Deployment", WORKER)
    for probe in ("livenessProbe", "startupProbe", "readinessProbe"):
        assert probe in container, f"{overlay.overlay}: the worker lost its {probe}"
        command = container[probe]["exec"]["command"]
        max_age = _probe_max_age(command)
        assert command == probe_command(settings.effective_heartbeat_dir, max_age), f"{probe} drifted from the code"
        # One missed beat (interval) must not fail it, and a dead heartbeat must within a few minutes.
        assert 2 * settings.heartbeat_interval <= max_age <= 300
        assert container[probe].get("timeoutSeconds", 1) >= 2
    mounts = _mounts(pod_spec(worker), container)
    for directory in (settings.effective_heartbeat_dir, settings.effective_metrics_dir, settings.data_dir):
        assert _on_empty_dir(directory, mounts), f"{overlay.overlay}: {directory} is not on an emptyDir"


def test_worker_exposes_its_metrics_port(overlay: Manifests) -> None:
    ports = {p["name"]: p["containerPort"] for p in overlay.container("Deployment", WORKER)["ports"]}
    assert ports == {"metrics": overlay.settings().metrics_port}


def test_worker_pods_may_be_disrupted_one_at_a_time(overlay: Manifests) -> None:
    pdb = overlay.get("PodDisruptionBudget", WORKER)
    assert pdb["spec"]["maxUnavailable"] == 1
    assert "minAvailable" not in pdb["spec"]
    labels = pod_labels(overlay.get("Deployment", WORKER))
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()


# --- every pod ---------------------------------------------------------------------------------------------


def test_every_pod_runs_restricted(overlay: Manifests) -> None:
    """Pod Security Standard "restricted", plus a read-only root filesystem and the image's numeric user."""
    for workload in overlay.workloads():
        name = f"{overlay.overlay}: {workload['kind']}/{workload['metadata']['name']}"
        pod = pod_spec(workload)
        assert pod["securityContext"]["runAsNonRoot"] is True, name
        assert isinstance(pod["securityContext"]["runAsUser"], int) and pod["securityContext"]["runAsUser"] > 0, name
        assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault", name
        assert pod["automountServiceAccountToken"] is False, name
        for container in pod["containers"]:
            context = container.get("securityContext")
            assert context, f"{name}: container {container['name']} lost its securityContext"
            assert context["allowPrivilegeEscalation"] is False, name
            assert context["readOnlyRootFilesystem"] is True, name
            assert context.get("privileged", False) is False, name
            assert context["capabilities"]["drop"] == ["ALL"], name
            assert "add" not in context["capabilities"], name
            assert "/tmp" in _mounts(pod, container), f"{name}: /tmp must be writable (emptyDir)"


def test_every_container_has_requests_and_limits(overlay: Manifests) -> None:
    for workload in overlay.workloads():
        for container in pod_spec(workload)["containers"]:
            resources = container.get("resources", {})
            for kind in ("requests", "limits"):
                assert {"cpu", "memory"} <= set(resources.get(kind, {})), f"{workload['metadata']['name']}: {kind}"


def test_configuration_comes_from_the_configmap_and_secrets_from_secret_refs(overlay: Manifests) -> None:
    assert not overlay.of_kind("Secret"), "secret values must not be in the repo: create the Secrets by hand"
    assert not SECRET_SETTINGS & set(overlay.config()), f"secrets in the {CONFIG_MAP} ConfigMap"
    for workload in overlay.workloads():
        for container in pod_spec(workload)["containers"]:
            for variable in container.get("env", []):
                if variable["name"] == "CALSYNC_BROKER_URL":  # built from calsync-redis-auth: test_redis_secret.py
                    assert "$(REDIS_PASSWORD)" in variable["value"]
                    continue
                assert variable["name"] not in SECRET_SETTINGS, f"{variable['name']} must come from envFrom secretRef"
            refs = [source.get("secretRef", {}).get("name") for source in container.get("envFrom", [])]
            assert "calsync-secrets" in refs, f"{workload['metadata']['name']} does not read calsync-secrets"


def test_configmap_is_valid_configuration(overlay: Manifests) -> None:
    """Every key is a real CALSYNC_ setting (a typo would be ignored silently) and the values pass validation."""
    fields = {f"CALSYNC_{name.upper()}" for name in Settings.model_fields}
    assert set(overlay.config()) <= fields, set(overlay.config()) - fields
    overlay.settings()


def test_every_pod_is_covered_by_the_network_policy(overlay: Manifests) -> None:
    policy = overlay.get("NetworkPolicy", "calsync")
    selector = policy["spec"]["podSelector"]["matchLabels"]
    assert set(policy["spec"]["policyTypes"]) == {"Ingress", "Egress"}
    for workload in overlay.workloads():
        assert selector.items() <= pod_labels(workload).items(), f"{workload['metadata']['name']} is unrestricted"
    ingress_ports = {p["port"] for rule in policy["spec"]["ingress"] for p in rule["ports"]}
    assert ingress_ports == {"metrics"}, "only Prometheus' scrape may reach calsync pods"
    egress_ports = {p["port"] for rule in policy["spec"]["egress"] for p in rule["ports"]}
    assert egress_ports == {53, 6379, 5432, 443}, "DNS, Redis, PostgreSQL and the providers' HTTPS only"


# --- exporter, jobs ----------------------------------------------------------------------------------------


def test_exporter_is_one_replica_behind_its_service(overlay: Manifests) -> None:
    exporter = overlay.get("Deployment", EXPORTER)
    assert exporter["spec"]["replicas"] == 1, "a second exporter would double every summed queue gauge"
    assert exporter["spec"]["strategy"]["type"] == "Recreate"
    container = overlay.container("Deployment", EXPORTER)
    assert container["args"] == ["exporter"]
    assert {p["name"]: p["containerPort"] for p in container["ports"]} == {"metrics": overlay.settings().exporter_port}
    service = overlay.get("Service", EXPORTER)
    assert service["spec"]["selector"].items() <= pod_labels(exporter).items()
    assert [(p["name"], p["targetPort"]) for p in service["spec"]["ports"]] == [("metrics", "metrics")]


def test_migration_job_is_versioned_with_the_image(overlay: Manifests) -> None:
    """A Job's template is immutable: a new image needs a new Job name, and config changes must not touch it."""
    (job,) = overlay.of_kind("Job")
    image = pod_spec(job)["containers"][0]["image"]
    tag = image.rsplit(":", 1)[1]
    assert job["metadata"]["name"] == "calsync-migrate-" + re.sub(r"[^a-z0-9-]", "-", tag.lower())
    assert pod_spec(job)["containers"][0]["args"] == ["migrate"]
    assert job["spec"]["ttlSecondsAfterFinished"] > 0
    assert pod_spec(job)["restartPolicy"] == "Never"
    sources = pod_spec(job)["containers"][0].get("envFrom", [])
    assert not [s for s in sources if s.get("configMapRef", {}).get("name", "").startswith(CONFIG_MAP)]


def test_reconcile_cronjob_only_enqueues_and_never_overlaps(overlay: Manifests) -> None:
    cron = overlay.get("CronJob", "calsync-reconcile")
    assert cron["spec"]["concurrencyPolicy"] == "Forbid"
    assert pod_spec(cron)["containers"][0]["args"] == ["reconcile", "--enqueue"]
    period = cron["spec"]["schedule"]
    assert re.fullmatch(r"\*/(\d+) \* \* \* \*", period), "keep the schedule a simple every-N-minutes"
    every_s = int(period.split()[0][2:]) * 60
    assert every_s <= overlay.settings().reconcile_after, "reconcile at least as often as targets become overdue"


def test_all_images_are_the_same_release(overlay: Manifests) -> None:
    images = {c["image"] for w in overlay.workloads() for c in pod_spec(w)["containers"]}
    assert len(images) == 1, images
    assert ":" in next(iter(images)), "pin the image tag"


# --- autoscaling -------------------------------------------------------------------------------------------


def test_keda_scales_on_the_brokers_ready_lists(overlay: Manifests) -> None:
    """listName is <CALSYNC_REDIS_NAMESPACE>:<queue>, the key Dramatiq's Redis broker pushes ready ids to, for
    each queue workers consume (the calendar queue, its bulk lane, the intake queue, the webhook queue and the drift
    sweeps' queue)."""
    scaled = overlay.of_kind("ScaledObject")
    if not scaled:
        assert overlay.of_kind("HorizontalPodAutoscaler"), "no autoscaler at all"
        return
    (obj,) = scaled
    settings = overlay.settings()
    defaults = Settings()
    sync, bulk, intake, webhooks, drift = obj["spec"]["triggers"]
    lanes = ((sync, settings.queue, defaults.queue),
             (bulk, settings.effective_bulk_queue, defaults.effective_bulk_queue),
             (intake, settings.intake_queue, defaults.intake_queue),
             (webhooks, settings.webhook_queue, defaults.webhook_queue),
             (drift, settings.effective_drift_queue, defaults.effective_drift_queue))  # fmt: skip
    for trigger, queue, default in lanes:
        assert trigger["type"] == "redis"
        assert trigger["metadata"]["listName"] == RedisKeys(settings.redis_namespace).ready_queue(queue)
        assert trigger["metadata"]["listName"] == f"{defaults.redis_namespace}:{default}"
        assert int(trigger["metadata"]["listLength"]) >= 1
    assert obj["spec"]["minReplicaCount"] >= 1, "at zero workers nothing moves due retries out of the delay queue"
    assert obj["spec"]["maxReplicaCount"] >= obj["spec"]["minReplicaCount"]
    for trigger in (sync, bulk, intake, webhooks, drift):
        auth = trigger["authenticationRef"]["name"]
        assert overlay.get("TriggerAuthentication", auth)["spec"]["secretTargetRef"]


def test_hpa_scales_on_the_exporters_queue_metric(overlay: Manifests) -> None:
    hpas = overlay.of_kind("HorizontalPodAutoscaler")
    if not hpas:
        return
    (hpa,) = hpas
    assert hpa["spec"]["minReplicas"] >= 1
    settings = overlay.settings()
    normal, bulk, intake, webhooks, drift = hpa["spec"]["metrics"]
    for metric, queue in ((normal, settings.queue), (bulk, settings.effective_bulk_queue),
                          (intake, settings.intake_queue), (webhooks, settings.webhook_queue),
                          (drift, settings.effective_drift_queue)):  # fmt: skip
        assert metric["external"]["metric"]["name"] == "calsync_queue_ready_messages"
        assert metric["external"]["metric"]["selector"]["matchLabels"] == {"queue": queue}
    keda = yaml.safe_load((K8S / "components" / "keda" / "scaledobject.yaml").read_text())
    lengths = [trigger["metadata"]["listLength"] for trigger in keda["spec"]["triggers"]]
    assert [m["external"]["target"]["averageValue"] for m in hpa["spec"]["metrics"]] == lengths, "as KEDA scales"
    adapter = yaml.safe_load((K8S / "components" / "hpa" / "prometheus-adapter-values.yaml").read_text())
    (rule,) = adapter["rules"]["external"]
    assert rule["seriesQuery"].startswith("calsync_queue_ready_messages{")


# --- monitoring objects ------------------------------------------------------------------------------------


def test_prometheus_objects_carry_the_release_label(overlay: Manifests) -> None:
    """kube-prometheus-stack ignores PrometheusRules and monitors without `release: <its Helm release>`."""
    values = {
        obj["metadata"].get("labels", {}).get("release")
        for kind in ("PrometheusRule", "ServiceMonitor", "PodMonitor") for obj in overlay.of_kind(kind)
    }  # fmt: skip
    assert len(values) == 1 and None not in values, values


def test_scrape_jobs_are_the_ones_the_alerts_select(overlay: Manifests) -> None:
    """Every job="…" in the alert rules is a job label the PodMonitor or ServiceMonitor produces."""
    pod_monitor = overlay.get("PodMonitor", WORKER)["spec"]
    worker_labels = pod_labels(overlay.get("Deployment", WORKER))
    assert pod_monitor["selector"]["matchLabels"].items() <= worker_labels.items()
    assert {e["port"] for e in pod_monitor["podMetricsEndpoints"]} == {"metrics"}
    service_monitor = overlay.get("ServiceMonitor", EXPORTER)["spec"]
    service = overlay.get("Service", EXPORTER)
    assert service_monitor["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert {e["port"] for e in service_monitor["endpoints"]} <= {p["name"] for p in service["spec"]["ports"]}
    jobs = {worker_labels[pod_monitor["jobLabel"]], service["metadata"]["labels"][service_monitor["jobLabel"]]}
    (rule,) = overlay.of_kind("PrometheusRule")
    selected = set(re.findall(r'\bjob="([^"]+)"', json.dumps(rule["spec"]).replace('\\"', '"')))
    assert selected and selected <= jobs, f"rules select {selected}, scrapes produce {jobs}"


def test_dashboard_configmap_is_picked_up_by_the_grafana_sidecar(overlay: Manifests) -> None:
    dashboards = [
        cm for cm in overlay.of_kind("ConfigMap") if cm["metadata"].get("labels", {}).get("grafana_dashboard")
    ]
    assert len(dashboards) == 1
    assert dashboards[0]["metadata"]["labels"]["grafana_dashboard"] == "1"
    (content,) = dashboards[0]["data"].values()
    assert json.loads(content)["panels"]
    assert len(content.encode()) < 1024 * 1024, "a ConfigMap holds at most 1 MiB"

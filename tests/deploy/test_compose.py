"""docker-compose.yml is a valid Compose file for the full local stack, and its Prometheus and Grafana see calsync."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from calsync.core.config.settings import Settings
from tests.deploy.conftest import Tool
from tests.deploy.manifests import ROOT
from tests.deploy.test_docker import image_env
from tests.support import probe_command

COMPOSE = ROOT / "docker-compose.yml"
PROMETHEUS_CONFIG = ROOT / "deploy" / "compose" / "prometheus.yml"
SERVICES = {
    "redis",
    "postgres",
    "migrate",
    "worker",
    "exporter",
    "google-emulator",
    "ews-emulator",
    "prometheus",
    "grafana",
}


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    """docker-compose.yml as Compose reads it (YAML merge keys resolved)."""
    return dict(yaml.safe_load(COMPOSE.read_text()))


def test_compose_file_matches_the_compose_specification(check_jsonschema: Tool) -> None:
    done = check_jsonschema("--builtin-schema", "vendor.compose-spec", COMPOSE)
    assert done.returncode == 0, done.stdout + done.stderr


def test_prometheus_config_is_valid(promtool: Tool) -> None:
    # --syntax-only: rule_files name paths inside the container.
    done = promtool("check", "config", "--syntax-only", PROMETHEUS_CONFIG)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_whole_stack_is_there(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert set(services) == SERVICES
    redis = services["redis"]
    assert "--appendonly" in redis["command"] and any(v.endswith(":/data") for v in redis["volumes"])
    assert services["worker"]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    for name in ("migrate", "worker", "exporter", "google-emulator", "ews-emulator"):
        assert services[name]["image"] == "calsync:local" and services[name]["read_only"] is True, name


def test_emulators_run_from_the_mounted_source_since_the_image_has_none(compose: dict[str, Any]) -> None:
    for kind in ("google", "ews"):
        service = compose["services"][f"{kind}-emulator"]
        python, *args = service["command"]
        assert python == image_env()["PATH"].split(":")[0] + "/python", "the image's interpreter, run as-is"
        assert args[:4] == ["-m", "calsync_emulators", "emulator", kind]
        mounts = dict(v.split(":")[:2] for v in service["volumes"])
        assert mounts["./emulators"] == service["environment"]["PYTHONPATH"]
        assert (ROOT / "emulators" / "calsync_emulators" / "__main__.py").exists()


def test_bind_mounts_exist_in_the_repository(compose: dict[str, Any]) -> None:
    for name, service in compose["services"].items():
        for volume in service.get("volumes", []):
            source = volume.split(":", 1)[0]
            if source.startswith("."):
                assert (ROOT / source).exists(), f"{name}: {source} does not exist"


def test_worker_healthcheck_is_the_liveness_probe(compose: dict[str, Any]) -> None:
    """Same heartbeat check as Kubernetes, on the image's default heartbeat dir ($ doubled for interpolation)."""
    worker = compose["services"]["worker"]
    test = worker["healthcheck"]["test"]
    assert test[0] == "CMD"
    command = [part.replace("$$", "$") for part in test[1:]]
    max_age = int(re.findall(r"-lt (\d+) \]", command[-1])[0])
    assert command == probe_command(Path(image_env()["CALSYNC_HEARTBEAT_DIR"]), max_age)
    assert "/run/calsync" in worker["tmpfs"]


def test_worker_gets_time_to_drain(compose: dict[str, Any]) -> None:
    grace = compose["services"]["worker"]["stop_grace_period"]
    assert re.fullmatch(r"\d+s", grace)
    assert int(grace[:-1]) > Settings().worker_shutdown_timeout


def test_prometheus_scrapes_the_jobs_the_rules_select() -> None:
    config = yaml.safe_load(PROMETHEUS_CONFIG.read_text())
    jobs = {scrape["job_name"] for scrape in config["scrape_configs"]}
    rules = (ROOT / "k8s" / "monitoring" / "prometheus-rules.yml").read_text()
    assert set(re.findall(r'\bjob="([^"]+)"', rules)) <= jobs


def test_grafana_loads_the_dashboard_with_a_prometheus_datasource(compose: dict[str, Any]) -> None:
    provisioning = ROOT / "deploy" / "compose" / "grafana" / "provisioning"
    (datasource,) = yaml.safe_load((provisioning / "datasources" / "prometheus.yml").read_text())["datasources"]
    assert datasource["type"] == "prometheus" and datasource["url"] == "http://prometheus:9090"
    (provider,) = yaml.safe_load((provisioning / "dashboards" / "calsync.yml").read_text())["providers"]
    mounts = dict(v.split(":")[:2] for v in compose["services"]["grafana"]["volumes"] if v.startswith("."))
    dashboard_target = mounts["./k8s/monitoring/grafana-dashboard.json"]
    assert Path(dashboard_target).parent == Path(provider["options"]["path"])

"""A real Prometheus (and Alertmanager) for the monitoring tests, scraping real calsync processes.

The rules Prometheus loads are the shipped ones generated again from k8s/monitoring/source with a test profile:
thresholds and windows scaled down (:data:`LIVE_PARAMS`) and every ``for:`` shortened to :data:`LIVE_FOR`, so an
alert fires within seconds of its cause. The expressions are otherwise exactly those of prometheus-rules.yml.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import threading
import urllib.parse
import urllib.request
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from k8s.monitoring.source.alerts import rule_groups
from k8s.monitoring.source.params import DEFAULTS, Params
from k8s.monitoring.source.yaml_text import Value, dump
from tests.conftest import missing
from tests.monitoring.artefacts import MONITORING
from tests.support import free_port, wait_until

LIVE_PARAMS = dataclasses.replace(
    DEFAULTS,
    backlog_min_messages=20,
    backlog_window="20s",
    oldest_message_max_age_s=15,
    job_window="20s",
    min_finished_jobs=10,
    retry_window="20s",
    heartbeat_stale_after_s=5,
    reconcile_after_s=60,
    drift_sweep_max_age_s=60,
)
LIVE_FOR = "3s"
NAMESPACE = "calsync"  # the scope label every target gets, as the Kubernetes service discovery would add it
WORKER_POD = "calsync-worker-0"


def live_rules(params: Params = LIVE_PARAMS, for_: str = LIVE_FOR) -> str:
    """The rules file of ``params`` with every ``for:`` set to ``for_``."""
    groups = rule_groups(params)
    for group in groups["groups"]:  # type: ignore[union-attr]
        for rule in group["rules"]:  # type: ignore[index]
            rule["for"] = for_  # type: ignore[index]
    return dump(groups)


def binary(name: str, package: str) -> str:
    """A Debian binary the live tests need (failed when TEST_REQUIRE_SERVICES names ``name``, else skipped)."""
    found = shutil.which(name)
    if found is None:
        missing(name.removeprefix("prometheus-"), f"not installed (Debian package {package})")
    return found


def get_json(url: str) -> Any:
    """GET ``url`` and decode its JSON answer."""
    with urllib.request.urlopen(url, timeout=10) as answer:
        return json.loads(answer.read())


class Server:
    """A Prometheus or Alertmanager process in its own session, its output in a log file."""

    def __init__(self, command: list[str], log: Path, ready_url: str) -> None:
        self.log = log
        with open(log, "ab") as out:
            self.proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        wait_until(lambda: answers(ready_url) or self.proc.poll() is not None, timeout=30, what=ready_url)
        assert self.proc.poll() is None, self.log.read_text()[-3000:]

    def stop(self) -> None:
        """SIGTERM it and reap it."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=30)


def answers(url: str) -> bool:
    """Whether ``url`` answers 200 now."""
    try:
        with urllib.request.urlopen(url, timeout=2) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


class Prometheus(Server):
    """A real Prometheus scraping ``targets`` (job name → host:port) every second, evaluating the live rules."""

    def __init__(self, directory: Path, targets: Mapping[str, str], *, rules: str, alertmanager: str | None = None):
        self.port = free_port()
        self.fired: set[str] = set()  # every alert wait_firing saw fire
        self.url = f"http://127.0.0.1:{self.port}"
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "rules.yml").write_text(rules)
        scrape_configs: list[Value] = []
        for job, target in targets.items():
            labels: dict[str, Value] = {"namespace": NAMESPACE}
            if job == DEFAULTS.worker_job:
                labels["pod"] = WORKER_POD
            scrape_configs.append({"job_name": job, "static_configs": [{"targets": [target], "labels": labels}]})
        config: dict[str, Value] = {
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(directory / "rules.yml")],
            "scrape_configs": scrape_configs,
        }
        if alertmanager is not None:
            config["alerting"] = {"alertmanagers": [{"static_configs": [{"targets": [alertmanager]}]}]}
        (directory / "prometheus.yml").write_text(dump(config))
        command = [
            binary("prometheus", "prometheus"),
            f"--config.file={directory / 'prometheus.yml'}",
            f"--storage.tsdb.path={directory / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--log.level=warn",
        ]
        super().__init__(command, directory / "prometheus.log", f"{self.url}/-/ready")

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query's result vector (an error fails the test with Prometheus' message)."""
        answer = get_json(f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
        assert answer["status"] == "success", answer
        return list(answer["data"]["result"])

    def alerts(self) -> list[dict[str, Any]]:
        """Every active alert (pending or firing) as /api/v1/alerts lists it."""
        return list(get_json(f"{self.url}/api/v1/alerts")["data"]["alerts"])

    def firing(self) -> dict[str, list[dict[str, str]]]:
        """Firing alerts: name → the label sets it fires with."""
        found: dict[str, list[dict[str, str]]] = {}
        for alert in self.alerts():
            if alert["state"] == "firing":
                found.setdefault(alert["labels"]["alertname"], []).append(alert["labels"])
        return found

    def wait_firing(self, name: str, *, timeout: float = 90) -> list[dict[str, str]]:
        """Wait until ``name`` fires; its label sets."""
        found = wait_until(lambda: self.firing().get(name), timeout=timeout, what=f"{name} to fire")
        self.fired.add(name)
        return found

    def wait_resolved(self, *names: str, timeout: float = 90) -> None:
        """Wait until none of ``names`` is pending or firing."""
        wait_until(
            lambda: not {a["labels"]["alertname"] for a in self.alerts()} & set(names),
            timeout=timeout,
            what=f"{', '.join(names)} to resolve",
        )

    def wait_scraped(self, job: str, *, timeout: float = 30) -> None:
        """Wait until ``job``'s target was scraped successfully."""
        wait_until(lambda: self.query(f'up{{job="{job}"}} == 1'), timeout=timeout, what=f"{job} to be up")


EXAMPLE_ROUTE = MONITORING / "alertmanager-example.yml"
_EXAMPLE_URLS = {"http://team-channel-bridge.example/calsync": "team", "http://pager-bridge.example/calsync": "pager"}


class Notifications:
    """An HTTP receiver for Alertmanager's webhooks: every notification (its JSON) by the receiver's path."""

    def __init__(self) -> None:
        self.received: list[tuple[str, dict[str, Any]]] = []
        received = self.received

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                received.append((self.path.strip("/"), json.loads(body)))
                self.send_response(200)
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def alerts(self, receiver: str) -> list[dict[str, Any]]:
        """Every alert notified to ``receiver`` (``team`` or ``pager``), firing or resolved."""
        return [alert for path, doc in self.received if path == receiver for alert in doc["alerts"]]

    def close(self) -> None:
        """Stop serving."""
        self.server.shutdown()
        self.server.server_close()


class Alertmanager(Server):
    """A real Alertmanager running the shipped example route, its receivers' URLs pointed at ``notifications``
    and its timings shortened to a second."""

    def __init__(self, directory: Path, notifications: Notifications) -> None:
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        directory.mkdir(parents=True, exist_ok=True)
        config = EXAMPLE_ROUTE.read_text()
        for url, receiver in _EXAMPLE_URLS.items():
            assert url in config, f"{url} is no longer in {EXAMPLE_ROUTE.name}"
            config = config.replace(url, f"{notifications.url}/{receiver}")
        config = re.sub(r"(group_wait|group_interval): \w+", r"\1: 1s", config)
        (directory / "alertmanager.yml").write_text(config)
        command = [
            binary("prometheus-alertmanager", "prometheus-alertmanager"),
            f"--config.file={directory / 'alertmanager.yml'}",
            f"--storage.path={directory / 'data'}",
            f"--web.listen-address={self.address}",
            "--cluster.listen-address=",
            "--log.level=warn",
        ]
        super().__init__(command, directory / "alertmanager.log", f"http://{self.address}/-/ready")

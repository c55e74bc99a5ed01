"""Request metrics of the HTTP intake, served on the API's own ``/metrics`` (docs/METRICS.md, HTTP intake).

``calsync_http_requests_total{route, method, status}`` and ``calsync_http_request_duration_seconds{route,
method}``. ``route`` is the route template (``/v1/events/{entity_id}``), never a concrete path, and
``unmatched`` for paths no route serves, so labels stay low-cardinality. A private registry: the API
process exports only these. With several server processes (``--workers``), each writes multiprocess
files to one directory and ``/metrics``, whichever process answers, sums them.
"""

from __future__ import annotations

from pathlib import Path

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector

UNMATCHED = "unmatched"
_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)

REGISTRY = CollectorRegistry(auto_describe=True)
REQUESTS = Counter(
    "calsync_http_requests_total",
    "HTTP requests answered by the intake API, by route template, method and status code.",
    ["route", "method", "status"],
    registry=REGISTRY,
)
DURATION = Histogram(
    "calsync_http_request_duration_seconds",
    "Time from receiving an HTTP request to sending the end of its answer.",
    ["route", "method"],
    buckets=_BUCKETS,
    registry=REGISTRY,
)
CONTENT_TYPE = CONTENT_TYPE_LATEST


def observe(route: str, method: str, status: int, seconds: float) -> None:
    """Count one answered request."""
    REQUESTS.labels(route, method, str(status)).inc()
    DURATION.labels(route, method).observe(seconds)


def exposition(multiprocess_dir: Path | None) -> bytes:
    """The metrics text: this process's registry, or the sum over the server processes' files."""
    if multiprocess_dir is None:
        return generate_latest(REGISTRY)
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=str(multiprocess_dir))  # type: ignore[no-untyped-call]
    return generate_latest(registry)

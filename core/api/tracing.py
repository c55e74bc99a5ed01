"""Per-request trace id, one JSON log line and the metrics of each request (a pure ASGI middleware).

The trace id comes from a W3C ``traceparent`` header (its trace-id field), else ``X-Request-Id``, else a
new one; it is attached to every log line of the request, passed to the intake as the jobs' ``trace_id``,
and sent back as ``X-Request-Id``. The log line has method, route template, status, duration, tenant and
key id: never a header value, so an API key cannot reach a log. An error no handler took is answered here
with a 500 problem and logged once, inside the request's trace context (core/api/problems.py).

The metrics, served on the API's own ``/metrics`` (docs/METRICS.md, HTTP intake):
``calsync_http_requests_total{route, method, status}`` and ``calsync_http_request_duration_seconds{route,
method}``. ``route`` is the route template (``/v1/events/{entity_id}``), never a concrete path, and
``unmatched`` for paths no route serves, so labels stay low-cardinality. A private registry: the API
process exports only these. With several server processes (``--workers``), each writes multiprocess
files to one directory and ``/metrics``, whichever process answers, sums them.
"""

from __future__ import annotations

import logging
import re
import time
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from calsync.core.api import problems
from calsync.core.config.logging import job_context
from calsync.core.model.ids import new_trace_id

log = logging.getLogger("calsync.api.access")

_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$")
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:@/+=-]{1,128}$")
_NO_TRACE = "0" * 32

UNMATCHED = "unmatched"
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
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
    registry=REGISTRY,
)


def exposition(multiprocess_dir: Path | None) -> bytes:
    """The metrics text: this process's registry, or the sum over the server processes' files."""
    if multiprocess_dir is None:
        return generate_latest(REGISTRY)
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=str(multiprocess_dir))  # type: ignore[no-untyped-call]
    return generate_latest(registry)


def trace_id_from(headers: Headers) -> str:
    """The caller's trace id (``traceparent`` first, then ``X-Request-Id``), or a new one if neither is usable."""
    traceparent = headers.get("traceparent", "")
    parent = _TRACEPARENT.match(traceparent.strip().lower())
    if parent and parent[1] != _NO_TRACE and not traceparent.startswith("ff"):
        return parent[1]
    request_id = headers.get("x-request-id", "").strip()
    return request_id if _REQUEST_ID.match(request_id) else new_trace_id()


class RequestObserver:
    """Gives each HTTP request its trace id, answers an unexpected error, then logs and counts how it was answered."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        trace = trace_id_from(Headers(scope=scope))
        scope.setdefault("state", {})["trace_id"] = trace
        status = 0  # no answer started yet

        async def send_observed(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message.setdefault("headers", []).append((b"x-request-id", trace.encode("latin-1")))
            await send(message)

        try:
            with job_context({"trace_id": trace}):
                try:
                    await self.app(scope, receive, send_observed)
                except Exception as error:
                    if status:  # the answer is under way: the server logs the error and drops the connection
                        raise
                    await problems.answer_unexpected(error, scope, receive, send_observed)
        finally:
            self._record(scope, status or 500, time.perf_counter() - started, trace)

    @staticmethod
    def _record(scope: Scope, status: int, seconds: float, trace: str) -> None:
        route = getattr(scope.get("route"), "path", None) or UNMATCHED
        method = scope["method"]
        REQUESTS.labels(route, method, str(status)).inc()
        DURATION.labels(route, method).observe(seconds)
        fields: dict[str, Any] = {"method": method, "route": route, "status": status,
                                  "duration_ms": round(seconds * 1000, 2), "trace_id": trace}  # fmt: skip
        principal = scope.get("state", {}).get("principal")
        if principal is not None:
            fields.update(tenant_id=principal.tenant_id, key_id=principal.id)
        log.info("%s %s %s", method, route, status, extra={"fields": fields})

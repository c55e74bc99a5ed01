"""The application factory: routes, problem answers, body limit, tracing and metrics, from the parts given."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable
from importlib import metadata
from typing import Any

from fastapi import FastAPI, Response
from prometheus_client import CONTENT_TYPE_LATEST

from calsync.core.api import problems
from calsync.core.api.auth import KeyCache
from calsync.core.api.body_limit import BodyLimit
from calsync.core.api.problems import Problem
from calsync.core.api.routes import (
    accounts,
    changes,
    dead_letters,
    drift,
    event_search,
    events,
    health,
    jobs,
    pause,
    webhooks,
)  # fmt: skip
from calsync.core.api.services import ApiServices
from calsync.core.api.tracing import RequestObserver, exposition

TITLE = "calsync HTTP intake"
DESCRIPTION = (
    "Submit calendar changes and read their sync state with a per-tenant API key "
    "(`Authorization: Bearer <key>`). Errors are RFC 9457 `application/problem+json`. "
    "The wire contract with examples: docs/PROTOCOL.md."
)


def create_app(services: ApiServices | None, *, on_shutdown: Callable[[], None] | None = None) -> FastAPI:
    """The ASGI application over ``services`` (None builds one that can only describe itself: OpenAPI)."""

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        if on_shutdown is not None:
            on_shutdown()

    app = FastAPI(
        title=TITLE, description=DESCRIPTION, version=metadata.version("calsync"),
        docs_url=None, redoc_url=None, lifespan=lifespan,
    )  # fmt: skip
    app.state.services = services
    app.state.key_cache = KeyCache(services.key_cache_seconds if services else 0)
    for module in (changes, events, event_search, jobs, dead_letters, accounts, webhooks, drift, pause, health):
        app.include_router(module.router)
    problems.install(app)
    multiprocess_dir = services.metrics_dir if services else None

    @app.get("/metrics", include_in_schema=False)
    def prometheus_metrics() -> Response:
        return Response(exposition(multiprocess_dir), media_type=CONTENT_TYPE_LATEST)

    app.add_middleware(BodyLimit, max_bytes=services.max_body_bytes if services else ApiServices.max_body_bytes)
    app.add_middleware(RequestObserver)
    _describe_problems(app)
    return app


def _describe_problems(app: FastAPI) -> None:
    """Adds the Problem schema that every documented error response refers to."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:  # FastAPI's document is made once and kept: the schema is added to it then
            problem = Problem.model_json_schema(ref_template="#/components/schemas/{model}")
            generate()["components"]["schemas"].update(problem.pop("$defs", {}), Problem=problem)
        return generate()

    app.openapi = openapi  # type: ignore[method-assign]


def openapi_document() -> str:
    """The OpenAPI 3.1 document as committed in docs/openapi.json."""
    return json.dumps(create_app(None).openapi(), indent=2, sort_keys=False) + "\n"

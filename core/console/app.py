"""The console's ASGI application, mounted by ``calsync serve`` at ``/console``: its pages, static files and error
pages (HTML, not problem+json: the HTTP API keeps those)."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import HTTPException
from fastapi.staticfiles import StaticFiles
from starlette.responses import Response

from calsync.core.console.pages import accounts, audit, dead_letters, events, overview, sign_in, webhooks
from calsync.core.console.services import ConsoleServices
from calsync.core.console.templating import STATIC_DIR, redirect, render

# Each page module's ``router``, in the navigation's order. A page takes ``Console`` from core.console.services
# (importing it from here would be a cycle: this module imports the pages).
PAGES: tuple[object, ...] = (overview, events, dead_letters, accounts, webhooks, audit, sign_in)


async def _error_page(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    context = {"status": exc.status_code, "detail": exc.detail, "title": f"{exc.status_code}"}
    response = render(request, "error.html", context, status_code=exc.status_code)
    response.headers.update(exc.headers or {})  # a redirect's Location (sign in first)
    return response


def create_console(services: ConsoleServices) -> FastAPI:
    """The console over ``services``: mount it at ``/console`` of the HTTP API's application."""
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
    app.state.console = services
    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")
    for module in PAGES:
        app.include_router(module.router)  # type: ignore[attr-defined]
    app.add_exception_handler(HTTPException, _error_page)

    @app.get("/", include_in_schema=False)
    def home() -> Response:
        return redirect("overview")

    return app

"""Fixtures of the console's tests: ``calsync serve``'s application (the API with the console mounted) live on a free
port, over the test pipeline's database, Redis and broker, and clients signed in as an operator of a given role."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

import httpx
import pytest
from fastapi import FastAPI, HTTPException, Request
from starlette.routing import Mount

from calsync.actors.cli.serve import serving_app
from calsync.core.api.services import services_from_clients
from calsync.core.console.auth import Operator, acting, signed_in
from calsync.core.model.vocabulary import OperatorRole
from tests.api.live import LiveApi, serving
from tests.support import Pipeline

_TOKEN = re.compile(r'name="csrf_token" value="([^"]+)"')


def form_token(html: str) -> str:
    """The CSRF token of the first form on a page, as a browser would send it back."""
    found = _TOKEN.search(html)
    assert found is not None, "the page has no form with a CSRF token"
    return found.group(1)


def console_of(app: FastAPI) -> FastAPI:
    """The console application mounted in ``calsync serve``'s application."""
    mount = next(r for r in app.routes if isinstance(r, Mount) and r.path == "/console")
    assert isinstance(mount.app, FastAPI)
    return mount.app


@pytest.fixture
def served_app(pipeline: Pipeline) -> FastAPI:
    """``calsync serve``'s application over this test's pipeline (not yet listening)."""
    return serving_app(pipeline.clients)


@pytest.fixture
def served(pipeline: Pipeline, served_app: FastAPI) -> Iterator[LiveApi]:
    """The API and the console, as ``calsync serve`` runs them, over this test's pipeline."""
    with serving(services_from_clients(pipeline.clients), served_app) as live:
        yield live


ConsoleClient = Callable[[OperatorRole], httpx.Client]


@pytest.fixture
def console_client(served: LiveApi, served_app: FastAPI) -> Iterator[ConsoleClient]:
    """Clients of the console signed in as an operator of the role asked for.

    Until the operators' sign-in lands (branch console-auth), this stands in for it by overriding the two auth
    dependencies; the console-auth branch replaces this body with a real sign-in, so page tests must send back
    the CSRF token of the page's form (:func:`form_token`) like a browser does.
    """
    console = console_of(served_app)
    clients: list[httpx.Client] = []

    def make(role: OperatorRole) -> httpx.Client:
        operator = Operator(id=f"op-{role}", name=f"{role}@example.test", role=role)

        async def as_signed_in(request: Request) -> Operator:
            request.state.operator, request.state.csrf_token = operator, "csrf-of-test"
            return operator

        async def as_acting(request: Request) -> Operator:
            await as_signed_in(request)
            if not operator.can_act:
                raise HTTPException(403, "a viewer cannot act")
            return operator

        console.dependency_overrides[signed_in] = as_signed_in
        console.dependency_overrides[acting] = as_acting
        client = httpx.Client(base_url=served.url + "/console", timeout=30, follow_redirects=False)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()

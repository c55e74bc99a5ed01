"""Fixtures of the console's tests: ``calsync serve``'s application (the API with the console mounted) live on a free
port, over the test pipeline's database, Redis and broker, and clients signed in as an operator of a given role."""

from __future__ import annotations

import re
import secrets
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from starlette.routing import Mount

from calsync.actors.cli.serve import serving_app
from calsync.core.api.services import services_from_clients
from calsync.core.model.vocabulary import OperatorRole
from calsync.core.store import operators
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


def submit_sign_in(client: httpx.Client, key: str, *, next_path: str = "", **options: Any) -> httpx.Response:
    """What a browser does to sign in: show the form (its token and cookie), then post the key with them."""
    token = form_token(client.get("/sign-in", **options).text)
    return client.post("/sign-in", data={"key": key, "next": next_path, "csrf_token": token}, **options)


def sign_in(served: LiveApi, key: str, *, next_path: str = "") -> httpx.Client:
    """A browser-like client of the console that signed in with ``key`` through the sign-in form."""
    client = httpx.Client(base_url=served.url + "/console", timeout=30, follow_redirects=False)
    answer = submit_sign_in(client, key, next_path=next_path)
    assert answer.status_code == 303, answer.text
    return client


def new_operator(served: LiveApi, role: OperatorRole, *, name: str | None = None) -> tuple[str, str]:
    """A new operator of ``role`` in the test's database: their name and one-time key."""
    name = name or f"{role}-{secrets.token_hex(3)}@example.test"
    with served.db.write() as conn:
        key, _record = operators.create(conn, name=name, role=role)
    assert key is not None
    return name, key


@pytest.fixture
def console_client(served: LiveApi) -> Iterator[ConsoleClient]:
    """Clients of the console signed in as a new operator of the role asked for, named ``<role>@example.test`` (each
    further call another operator, ``<role>-2@example.test``…, so a test may hold several), through the sign-in
    form like a browser (audited: ``console.sign_in``): the session cookie is kept, and a page's CSRF token
    (:func:`form_token`) must be posted back with every state-changing form."""
    clients: list[httpx.Client] = []
    made: Counter[OperatorRole] = Counter()

    def make(role: OperatorRole) -> httpx.Client:
        made[role] += 1  # the audit log's name: "operator@example.test", then "operator-2@example.test", …
        suffix = "" if made[role] == 1 else f"-{made[role]}"
        _name, key = new_operator(served, role, name=f"{role}{suffix}@example.test")
        clients.append(sign_in(served, key))
        return clients[-1]

    yield make
    for client in clients:
        client.close()

"""Fixtures of the console's tests: ``calsync serve``'s application (the API with the console mounted) live on a free
port, over the test pipeline's database, Redis and broker."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from calsync.actors.cli.serve import serving_app
from calsync.core.api.services import services_from_clients
from tests.api.live import LiveApi, serving
from tests.support import Pipeline


@pytest.fixture
def served(pipeline: Pipeline) -> Iterator[LiveApi]:
    """The API and the console, as ``calsync serve`` runs them, over this test's pipeline."""
    with serving(services_from_clients(pipeline.clients), serving_app(pipeline.clients)) as live:
        yield live

"""Fixtures of the HTTP API tests: a live server over the test pipeline's runtime (real database and broker)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

from calsync.core.api.services import services_from_clients
from tests.api.live import LiveApi, serving
from tests.support import Pipeline


@pytest.fixture
def api(pipeline: Pipeline) -> Iterator[LiveApi]:
    """``calsync serve``'s application on a free port, over this test's database, Redis and broker."""
    # No key cache: a revoked key is refused at once (tests/api/test_problems.py covers the cache).
    with serving(replace(services_from_clients(pipeline.clients), key_cache_seconds=0)) as live:
        yield live

"""The failover tests' Sentinel topology: the one of calsync_emulators.harness.sentinel (the chaos run uses it
too), failing where CI requires Redis and skipped elsewhere when ``redis-server`` is not installed."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from calsync_emulators.harness import sentinel
from calsync_emulators.harness.sentinel import Topology
from tests.conftest import missing


@contextmanager
def sentinel_topology(directory: Path) -> Iterator[Topology]:
    """A started :class:`Topology` in ``directory``, stopped afterwards."""
    binary = sentinel.redis_server_binary()
    if binary is None:
        missing("redis", "redis-server (Debian package redis-server) is not on the PATH")
    with sentinel.sentinel_topology(directory, binary) as topology:
        yield topology

"""Enqueue markers: a recent enqueue of the same job for a target version suppresses an identical one.

A marker per (target, operation, version) holds the job id of the first enqueue for ``DEDUP_TTL``
seconds. It is an optimisation, never the source of truth: when Redis fails the producer enqueues
anyway, and a duplicate job is harmless (jobs are idempotent).
"""

from __future__ import annotations

import logging
from typing import NamedTuple, Protocol

import redis

from calsync.core.model.payload import Operation
from calsync.core.redis.keys import RedisKeys

log = logging.getLogger(__name__)


class Mark(NamedTuple):
    """Which enqueue a marker stands for: one operation of one target version."""

    tenant_id: str
    entity_id: str
    account_id: str
    operation: Operation
    version: int


class EnqueueMarkers(Protocol):
    """Where the producer notes its recent enqueues."""

    def claim(self, mark: Mark, job_id: str, *, covered_by: tuple[Operation, ...] = ()) -> str | None:
        """None when this enqueue is new (now marked); else the job id of the identical one that came first.

        ``covered_by`` names operations whose marker for the same version also counts as that first enqueue.
        """
        ...

    def release(self, mark: Mark) -> None:
        """Forget a marker whose enqueue failed, so the next attempt is not suppressed."""
        ...


def _text(value: object) -> str | None:
    return value.decode() if isinstance(value, bytes) else None if value is None else str(value)


class RedisMarkers:
    """Enqueue markers as Redis strings set with NX and a TTL."""

    def __init__(self, client: redis.Redis, keys: RedisKeys, *, ttl_seconds: int) -> None:
        self._client = client
        self._keys = keys
        self._ttl = ttl_seconds

    def _key(self, mark: Mark) -> str:
        return self._keys.dedup(mark.tenant_id, mark.entity_id, mark.account_id, mark.operation, mark.version)

    def claim(self, mark: Mark, job_id: str, *, covered_by: tuple[Operation, ...] = ()) -> str | None:
        """None when this enqueue is new (now marked); else the job id of the identical one that came first."""
        try:
            for operation in covered_by:
                earlier = _text(self._client.get(self._key(mark._replace(operation=operation))))
                if earlier is not None:
                    return earlier
            if self._client.set(self._key(mark), job_id, nx=True, ex=self._ttl):
                return None
            return _text(self._client.get(self._key(mark)))
        except redis.RedisError:
            return None  # the markers are optional; a duplicate job is harmless

    def release(self, mark: Mark) -> None:
        """Forget a marker whose enqueue failed, so the next attempt is not suppressed."""
        try:
            self._client.delete(self._key(mark))
        except redis.RedisError:
            log.warning("could not clear the dedup marker", exc_info=True)

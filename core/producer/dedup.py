"""Enqueue markers: a recent enqueue of the same job for a target version suppresses an identical one.

A marker per (target, operation, version) holds the job id of the first enqueue for ``DEDUP_TTL``
seconds. It is an optimisation, never the source of truth: when Redis fails the producer enqueues
anyway, and a duplicate job is harmless (jobs are idempotent).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
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


class Claim(NamedTuple):
    """One enqueue about to happen: its marker, its job id, and operations whose marker also covers it."""

    mark: Mark
    job_id: str
    covered_by: tuple[Operation, ...] = ()


class EnqueueMarkers(Protocol):
    """Where the producer notes its recent enqueues."""

    def claim_all(self, claims: Sequence[Claim]) -> list[str | None]:
        """Per claim, None when this enqueue is new (now marked); else the job id of the identical one that came first.

        A claim's ``covered_by`` names operations whose marker for the same version also counts as that
        first enqueue. All claims are made at once (one Redis round trip, two when any has ``covered_by``).
        """
        ...

    def release(self, mark: Mark) -> None:
        """Forget a marker whose enqueue failed, so the next attempt is not suppressed."""
        ...


def _text(value: object) -> str | None:
    return value.decode() if isinstance(value, bytes) else None if value is None else str(value)


class RedisMarkers:
    """Enqueue markers as Redis strings set with NX and a TTL, claimed in pipelines."""

    def __init__(self, client: redis.Redis, keys: RedisKeys, *, ttl_seconds: int) -> None:
        self._client = client
        self._keys = keys
        self._ttl = ttl_seconds

    def _key(self, mark: Mark) -> str:
        return self._keys.dedup(mark.tenant_id, mark.entity_id, mark.account_id, mark.operation, mark.version)

    def claim_all(self, claims: Sequence[Claim]) -> list[str | None]:
        """Per claim, None when new (now marked); else the job id of the identical enqueue that came first."""
        try:
            earlier = self._covered(claims)
            fresh = [n for n, found in enumerate(earlier) if found is None]
            pipe = self._client.pipeline(transaction=False)
            for n in fresh:
                key = self._key(claims[n].mark)
                pipe.set(key, claims[n].job_id, nx=True, ex=self._ttl)
                pipe.get(key)
            replies = pipe.execute()
        except redis.RedisError:
            return [None] * len(claims)  # the markers are optional; a duplicate job is harmless
        for slot, n in enumerate(fresh):
            marked, holder = replies[2 * slot], replies[2 * slot + 1]
            earlier[n] = None if marked else _text(holder)
        return earlier

    def _covered(self, claims: Sequence[Claim]) -> list[str | None]:
        covering = [(n, op) for n, claim in enumerate(claims) for op in claim.covered_by]
        found: list[str | None] = [None] * len(claims)
        if not covering:
            return found
        pipe = self._client.pipeline(transaction=False)
        for n, op in covering:
            pipe.get(self._key(claims[n].mark._replace(operation=op)))
        for (n, _op), value in zip(covering, pipe.execute(), strict=True):
            if found[n] is None:
                found[n] = _text(value)
        return found

    def release(self, mark: Mark) -> None:
        """Forget a marker whose enqueue failed, so the next attempt is not suppressed."""
        try:
            self._client.delete(self._key(mark))
        except redis.RedisError:
            log.warning("could not clear the dedup marker", exc_info=True)

"""Enqueue markers: a recent enqueue of the same job suppresses an identical one; a recent edit delays the next.

A dedup marker per (target, operation, version) holds the job id of the first enqueue for ``DEDUP_TTL``
seconds. A coalesce marker per target (``COALESCE_WINDOW``) coalesces bursts: the first edit's job goes
out at once, an edit that finds the marker (refreshed by every edit) is delayed by the window, so of a
burst only the first and the newest write (the older delayed jobs find a newer version and are dropped
before the lock). An edit that finds the marker older than ``COALESCE_MAX_WAIT`` goes out at once, so
a target edited without pause is still written that often. Both are optimisations, never the source
of truth: when Redis fails the producer enqueues at once, and a duplicate job is harmless.

Both markers of every claim are claimed in one call of ``claim_markers.lua`` (per 500 claims).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from importlib.resources import files
from typing import Final, NamedTuple, Protocol

import redis

from calsync.core.model.payload import JobPayload, Operation
from calsync.core.redis.keys import RedisKeys

log = logging.getLogger(__name__)

_CHUNK: Final = 500  # claims per script call, so a huge fan-out does not hold Redis in one long script
_CLAIM_MARKERS: Final = files(__package__).joinpath("claim_markers.lua").read_text()


class Mark(NamedTuple):
    """Which enqueue a marker stands for: one operation of one target version (built by :meth:`of`)."""

    tenant_id: str
    entity_id: str
    account_id: str
    operation: Operation
    version: int

    @classmethod
    def of(cls, job: JobPayload) -> Mark:
        """The marker of a job: a create and an update of one version share the update's.

        Both are one operation at the provider (the worker creates or updates from state; core/model/planner.py
        labels them apart only for their idempotency keys). An identical resubmission labels its job update where
        the first submission labelled it create; sharing the marker, the two meet in one SET NX, even when the
        resubmission claims first (it can, between the first one's commit and its claim).
        """
        operation: Operation = "update" if job.operation == "create" else job.operation
        return cls(job.tenant_id, job.entity_id, job.account_id, operation, job.target_version)


class Claim(NamedTuple):
    """One enqueue about to happen: its marker and its job id."""

    mark: Mark
    job_id: str


class Claimed(NamedTuple):
    """The markers' answer to one claim: the identical job that came first, else when to enqueue this one."""

    earlier: str | None  # None: the enqueue is new (now marked)
    delay_ms: int | None = None  # the target is coalescing: enqueue this much later (None: at once)


class EnqueueMarkers(Protocol):
    """Where the producer notes its recent enqueues."""

    def claim_all(self, claims: Sequence[Claim]) -> list[Claimed]:
        """Per claim, the job id of the identical enqueue that came first, or (new, now marked) its delay."""
        ...

    def release(self, mark: Mark) -> None:
        """Forget a marker whose enqueue failed, so the next attempt is not suppressed."""
        ...


class RedisMarkers:
    """Enqueue markers: Redis strings set with NX and a TTL; ``window_ms`` 0: no coalesce markers."""

    def __init__(
        self, client: redis.Redis, keys: RedisKeys, *, ttl_seconds: int, window_ms: int = 0, max_wait_ms: int = 0
    ) -> None:
        self._client = client
        self._keys = keys
        self._args = [ttl_seconds, window_ms, max_wait_ms]
        self._window_ms = window_ms
        self._claim = client.register_script(_CLAIM_MARKERS)

    def claim_all(self, claims: Sequence[Claim]) -> list[Claimed]:
        """Per claim, the job id of the identical enqueue that came first, or (new, now marked) its delay."""
        replies: list[bytes | int | None] = []
        try:
            for start in range(0, len(claims), _CHUNK):
                chunk = claims[start : start + _CHUNK]
                keys = [key for claim in chunk for key in self._keys_of(claim.mark)]
                replies += self._claim(keys=keys, args=[*self._args, *(claim.job_id for claim in chunk)])
        except redis.RedisError:
            return [Claimed(None)] * len(claims)  # the markers are optional; a duplicate job is harmless
        return [
            Claimed(earlier.decode())
            if isinstance(earlier, bytes)
            else Claimed(None, self._window_ms if late else None)
            for earlier, late in zip(replies[::2], replies[1::2], strict=True)
        ]

    def _keys_of(self, mark: Mark) -> list[str]:
        dedup = self._keys.dedup(*mark)
        return [dedup, self._keys.coalesce(*mark[:3])] if self._window_ms else [dedup]

    def release(self, mark: Mark) -> None:
        """Forget a marker whose enqueue failed, so the next attempt is not suppressed."""
        try:
            self._client.delete(self._keys.dedup(*mark))
        except redis.RedisError:
            log.warning("could not clear the dedup marker", exc_info=True)

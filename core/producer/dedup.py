"""Enqueue markers: a recent enqueue of the same job suppresses an identical one; a recent edit delays the next.

A dedup marker per (target, operation, version) holds the job id of the first enqueue for ``DEDUP_TTL``
seconds. A settle marker per target (``COALESCE_WINDOW``) coalesces bursts: the first edit's job goes
out at once, an edit that finds the marker (refreshed by every edit) is delayed by the window, so of a
burst only the first and the newest write (the older delayed jobs find a newer version and are dropped
before the lock). An edit that finds the marker older than ``COALESCE_MAX_WAIT`` goes out at once, so
a target edited without pause is still written that often. Both are optimisations, never the source
of truth: when Redis fails the producer enqueues at once, and a duplicate job is harmless.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Final, NamedTuple, Protocol

import redis

from calsync.core.model.payload import Operation
from calsync.core.redis.keys import RedisKeys

log = logging.getLogger(__name__)

_CHUNK: Final = 500  # claims per script call, so a huge fan-out does not hold Redis in one long script


class Mark(NamedTuple):
    """Which enqueue a marker stands for: one operation of one target version (built by :meth:`of`)."""

    tenant_id: str
    entity_id: str
    account_id: str
    operation: Operation
    version: int

    @classmethod
    def of(cls, target: tuple[str, str, str], operation: Operation, version: int) -> Mark:
        """The marker of a job: a create and an update of one version share the update's.

        Both are one effect (the worker creates or updates from state; core/model/planner.py labels them apart
        only for their idempotency keys). An identical resubmission labels its job update where the first
        submission labelled it create; sharing the marker, the two meet in one SET NX, even when the
        resubmission claims first (it can, between the first one's commit and its claim).
        """
        return cls(*target, "update" if operation == "create" else operation, version)


class Claim(NamedTuple):
    """One enqueue about to happen: its marker and its job id."""

    mark: Mark
    job_id: str


class Claimed(NamedTuple):
    """The markers' answer to one claim: the identical job that came first, else when to enqueue this one."""

    earlier: str | None  # None: the enqueue is new (now marked)
    delay_ms: int | None = None  # the target is settling: enqueue this much later (None: at once)


# Every claim at once. KEYS: per claim its dedup marker, then (when ARGV[2], the window in ms, is above 0) its
# target's settle marker (its value: when the window opened, Redis time in ms). ARGV[1]: the dedup TTL in s,
# ARGV[3]: the longest hold in ms, then the claims' job ids. Returns per claim the earlier job id (false:
# newly marked) and 1 when its target is settling. The settle marker is set when absent or older than the
# longest hold, else its PX refreshed.
_CLAIM: Final = """
local window = tonumber(ARGV[2])
local longest = tonumber(ARGV[3])
local stride = 1
local now = 0
if window > 0 then
    stride = 2
    local clock = redis.call("time")
    now = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
end
local result = {}
for n = 1, #ARGV - 3 do
    local dedup = KEYS[stride * (n - 1) + 1]
    local earlier = false
    if not redis.call("set", dedup, ARGV[n + 3], "NX", "EX", ARGV[1]) then
        earlier = redis.call("get", dedup)
    end
    local settling = 0
    if window > 0 then
        local settle = KEYS[stride * n]
        if not redis.call("set", settle, now, "NX", "PX", window) then
            local opened = tonumber(redis.call("get", settle))
            if opened and now - opened < longest then
                redis.call("pexpire", settle, window)
                settling = 1
            else
                redis.call("set", settle, now, "PX", window)
            end
        end
    end
    result[2 * n - 1] = earlier
    result[2 * n] = settling
end
return result
"""


class EnqueueMarkers(Protocol):
    """Where the producer notes its recent enqueues."""

    def claim_all(self, claims: Sequence[Claim]) -> list[Claimed]:
        """Per claim, the job id of the identical enqueue that came first, or (new, now marked) its delay.

        All claims are made at once: one script call per 500 claims.
        """
        ...

    def release(self, mark: Mark) -> None:
        """Forget a marker whose enqueue failed, so the next attempt is not suppressed."""
        ...


def _text(value: object) -> str | None:
    return value.decode() if isinstance(value, bytes) else None if value is None else str(value)


class RedisMarkers:
    """Enqueue markers: Redis strings set with NX and a TTL, claimed by one script call; ``window_ms`` 0: no settle."""

    def __init__(
        self, client: redis.Redis, keys: RedisKeys, *, ttl_seconds: int, window_ms: int = 0, max_wait_ms: int = 0
    ) -> None:
        self._client = client
        self._keys = keys
        self._ttl = ttl_seconds
        self._window_ms = window_ms
        self._max_wait_ms = max_wait_ms
        self._claim = client.register_script(_CLAIM)

    def _key(self, mark: Mark) -> str:
        return self._keys.dedup(mark.tenant_id, mark.entity_id, mark.account_id, mark.operation, mark.version)

    def claim_all(self, claims: Sequence[Claim]) -> list[Claimed]:
        """Per claim, the job id of the identical enqueue that came first, or (new, now marked) its delay."""
        try:
            replies = [reply for start in range(0, len(claims), _CHUNK)
                       for reply in self._claim_chunk(claims[start : start + _CHUNK])]  # fmt: skip
        except redis.RedisError:
            return [Claimed(None)] * len(claims)  # the markers are optional; a duplicate job is harmless
        answers = []
        for holder, settling in zip(replies[::2], replies[1::2], strict=True):
            answers.append(Claimed(_text(holder)) if holder else Claimed(None, self._window_ms if settling else None))
        return answers

    def _claim_chunk(self, claims: Sequence[Claim]) -> list[object]:
        keys: list[str] = []
        for claim in claims:
            keys.append(self._key(claim.mark))
            if self._window_ms:
                mark = claim.mark
                keys.append(self._keys.settle(mark.tenant_id, mark.entity_id, mark.account_id))
        args: list[str | int] = [self._ttl, self._window_ms, self._max_wait_ms, *(c.job_id for c in claims)]
        return list(self._claim(keys=keys, args=args))

    def release(self, mark: Mark) -> None:
        """Forget a marker whose enqueue failed, so the next attempt is not suppressed."""
        try:
            self._client.delete(self._key(mark))
        except redis.RedisError:
            log.warning("could not clear the dedup marker", exc_info=True)

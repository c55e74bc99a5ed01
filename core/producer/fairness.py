"""Which lane a tenant's new sync jobs take: normal up to its recent enqueue rate, bulk past it.

Each tenant's enqueues are counted in fixed windows of ``BULK_WINDOW`` seconds (a Redis counter per
window, INCRBY and a TTL of two windows, never decremented, so a crash cannot leave it wrong). The
rate over the last window is estimated the usual sliding-window way: the previous window's count
weighted by the part of it still inside the last ``BULK_WINDOW`` seconds, plus the current one's.
Jobs within ``BULK_THRESHOLD`` of that estimate take the normal lane; the rest the bulk lane
(docs/notes/fairness.md). Like the dedup markers it is an optimisation: when Redis fails every job
takes the normal lane, and the order of a target's jobs does not matter (versions decide).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass

import redis

from calsync.core.clients import Clients
from calsync.core.model.vocabulary import Lane
from calsync.core.redis.keys import RedisKeys

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TenantLanes:
    """The lane choice from per-tenant enqueue counters in Redis, one pipeline per call; threshold 0: no bulk lane."""

    client: redis.Redis
    keys: RedisKeys
    _: KW_ONLY
    threshold: int
    window: float
    clock: Callable[[], float] = time.time

    def lanes(self, tenant_id: str, jobs: int) -> list[Lane]:
        """Normal for the jobs within the tenant's threshold over the last window, bulk for the rest."""
        if jobs <= 0 or self.threshold <= 0:
            return ["normal"] * max(jobs, 0)
        position = self.clock() / self.window
        window = math.floor(position)
        current = self.keys.tenant_enqueues(tenant_id, window)
        try:
            pipe = self.client.pipeline(transaction=False)
            pipe.incrby(current, jobs)
            pipe.expire(current, math.ceil(2 * self.window) + 1)  # two windows
            pipe.get(self.keys.tenant_enqueues(tenant_id, window - 1))
            counted, _, previous = pipe.execute()
        except redis.RedisError:
            log.warning("could not count the tenant's enqueues; its jobs take the normal lane", exc_info=True)
            return ["normal"] * jobs
        before = int(counted) - jobs + int(previous or 0) * (1 - (position - window))
        normal = min(jobs, max(0, self.threshold - math.floor(before)))
        lanes: list[Lane] = ["normal"] * normal
        return lanes + ["bulk"] * (jobs - normal)


def lane_choice(clients: Clients) -> TenantLanes:
    """The lane choice of a deployment (``BULK_THRESHOLD`` 0: every job on the normal lane, nothing counted)."""
    settings = clients.settings
    return TenantLanes(clients.redis, clients.keys, threshold=settings.bulk_threshold, window=settings.bulk_window)

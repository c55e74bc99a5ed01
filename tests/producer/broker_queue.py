"""What waits in the Redis broker's ready queue: read straight from Dramatiq's keys, as KEDA and the exporter see it."""

from __future__ import annotations

import json
from typing import Any

import redis

from calsync.core.model.payload import SYNC_JOB
from calsync.core.redis.keys import RedisKeys


def queued_payloads(redis_url: str, namespace: str, queue: str = "calendar") -> list[dict[str, Any]]:
    """The sync job payloads ready in ``queue`` of ``namespace``, oldest first."""
    keys = RedisKeys(namespace)
    client = redis.Redis.from_url(redis_url)
    try:
        ids = client.lrange(keys.ready_queue(queue), 0, -1)
        bodies = [client.hget(keys.queue_messages(queue), message_id) for message_id in ids]
    finally:
        client.close()
    messages = [json.loads(body) for body in bodies if body is not None]
    assert len(messages) == len(ids), "every ready message id has its body"
    assert {m["actor_name"] for m in messages} <= {SYNC_JOB}
    return [m["args"][0] for m in messages]

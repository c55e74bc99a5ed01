"""Pull delayed retries forward (``calsync retry-now``): after an outage, don't wait out the backoff.

Dramatiq keeps a delayed message's body in ``<q>.DQ.msgs`` and its id in the ``<q>.DQ`` list until a
worker prefetches it into memory (where it waits for its eta). For each selected message one Lua
script, atomically: if the id is still in the list, it is removed with its body (the message *moves*);
if a worker holds it, the original stays and runs at its eta as a harmless duplicate (a *copy*, marked
so that a second run does not copy it again). Either way a ready copy (same payload, same idempotency
key, no eta) is pushed to ``<q>``, so the job runs now, and the guards of ``run_sync`` (lock,
idempotency record, staleness) keep every effect single. Redis broker only: RabbitMQ holds delayed
messages as unacked deliveries that cannot be moved.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from importlib.resources import files
from typing import Any, Final

from calsync.core.clients import Clients, open_redis
from calsync.core.config.settings import MAX_DELAY_SECONDS, broker_kind
from calsync.core.messaging.lanes import lanes_of
from calsync.core.model.errors import CalsyncError, ConfigurationError, InvalidPayload
from calsync.core.model.payload import parse_payload

_PULL_FORWARD: Final = files(__package__).joinpath("pull_forward.lua").read_text()
_DELIVERY_OPTIONS = ("eta", "redis_message_id")


@dataclass(frozen=True)
class RetrySelection:
    """Which delayed jobs to pull forward: every given field must match (``everything`` selects all)."""

    tenant_id: str | None = None
    account_id: str | None = None
    entity_id: str | None = None
    reason: str | None = None  # a reason ("rate limited") or an error class ("RateLimited") of the last failure
    everything: bool = False

    def is_empty(self) -> bool:
        """Nothing selected: refused, so a bare ``retry-now`` never moves the whole queue by accident."""
        given = (self.tenant_id, self.account_id, self.entity_id, self.reason)
        return not self.everything and all(v is None for v in given)

    def selected(self, body: dict[str, Any]) -> str | None:
        """The job id of a delayed message body when it is selected (only sync jobs are)."""
        try:
            payload = parse_payload(body.get("args"))
        except InvalidPayload:
            return None
        wanted = {"tenant_id": self.tenant_id, "account_id": self.account_id, "entity_id": self.entity_id}
        if any(v is not None and getattr(payload, k) != v for k, v in wanted.items()):
            return None
        if self.reason is not None:
            history = body.get("options", {}).get("errors") or [{}]
            error_class = str(history[-1].get("error_class", ""))
            reasons = {cls.reason for cls in CalsyncError.with_subclasses() if cls.__name__ == error_class}
            if self.reason != error_class and self.reason not in reasons:
                return None
        return payload.job_id


@dataclass
class RetryNowReport:
    """What one ``retry-now`` did, by job id."""

    moved: list[str] = field(default_factory=list)
    copied: list[str] = field(default_factory=list)
    already_pulled: int = 0
    delayed_seen: int = 0

    def as_json(self) -> dict[str, Any]:
        """Printed by ``calsync retry-now``."""
        return {
            "moved": len(self.moved),
            "copied_from_workers": len(self.copied),
            "already_pulled_forward": self.already_pulled,
            "delayed_seen": self.delayed_seen,
            "job_ids": [*self.moved, *self.copied],
        }


def _ready_copy(body: dict[str, Any], queue: str, new_id: str) -> str:
    options = {k: v for k, v in body.get("options", {}).items() if k not in _DELIVERY_OPTIONS}
    options["redis_message_id"] = new_id
    return json.dumps({**body, "queue_name": queue, "options": options}, separators=(",", ":"))


def retry_now(clients: Clients, selection: RetrySelection) -> RetryNowReport:
    """Make the selected delayed jobs ready now; safe to run repeatedly (a job already pulled forward is gone)."""
    if broker_kind(clients.broker_url) != "redis":
        raise ConfigurationError("retry-now needs the Redis broker: RabbitMQ holds delayed messages in the workers")
    keys = clients.keys
    report = RetryNowReport()
    # A client of its own, closed at the end: the broker's Redis may be another than clients.redis.
    with open_redis(clients.broker_url) as client:
        move = client.register_script(_PULL_FORWARD)
        for queue in lanes_of(clients.settings).queues:
            for raw_id, raw_body in client.hscan_iter(keys.delayed_messages(queue), count=500):
                try:
                    body = json.loads(raw_body)
                except ValueError:  # UnicodeDecodeError is one too
                    continue  # not ours to judge: the worker dead-letters what it cannot decode
                report.delayed_seen += isinstance(body, dict)
                job_id = selection.selected(body) if isinstance(body, dict) else None
                if job_id is None:
                    continue
                redis_id = raw_id.decode()
                new_id = str(uuid.uuid4())
                routing = [keys.delayed_queue(queue), keys.delayed_messages(queue), keys.ready_queue(queue),
                           keys.queue_messages(queue), keys.pulled_forward(queue, redis_id)]  # fmt: skip
                args = [redis_id, new_id, _ready_copy(body, queue, new_id), int(MAX_DELAY_SECONDS)]
                done = int(move(keys=routing, args=args))
                if done > 0:
                    report.moved.append(job_id)
                elif done == 0:
                    report.copied.append(job_id)
                elif done == -2:
                    report.already_pulled += 1
    return report

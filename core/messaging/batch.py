"""Enqueueing many messages at once, each with its own delay; per message, whether it was enqueued.

A fan-out enqueues one job per target, each through the broker's own ``enqueue``. The answer says, per
message, whether it is on its queue, so the caller can leave the rest to the reconciler: a message that
could not be enqueued never makes the others fail or be lost.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, NamedTuple

import dramatiq

log = logging.getLogger(__name__)


class Outgoing(NamedTuple):
    """One message to enqueue, at once (``delay_ms`` None) or that many milliseconds later."""

    message: dramatiq.Message[Any]
    delay_ms: int | None = None


def enqueue_many(broker: dramatiq.Broker, outgoing: Sequence[Outgoing]) -> list[bool]:
    """One ``broker.enqueue`` per message; per message (in order), whether it was enqueued."""
    sent = []
    for message, delay_ms in outgoing:
        try:
            broker.enqueue(message, delay=delay_ms)
        except Exception:
            log.exception("enqueue failed", extra={"fields": {"message_id": message.message_id}})
            sent.append(False)
        else:
            sent.append(True)
    return sent

"""The body of the ``submit_change`` actor: an intake message, validated, becomes a saved change and its jobs.

The worker does exactly what ``calsync.submit_change`` does in a Python service (:class:`Intake`):
validate and authorize, commit the intent, enqueue one sync job per target. It is idempotent per
request: the message's ``request_id`` when it has one, else its Dramatiq ``message_id`` (kept across
retries and redeliveries), so a message delivered twice (a worker killed after the commit) creates
one version, not two events. A bad change raises :class:`~core.model.errors.InvalidChange` (or
EntityNotFound, IdempotencyKeyReused, …): a PermanentError, dead-lettered at once with its reason;
anything else (the database down) is retried on the schedule like any job.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Final

from calsync.core.model.intake import IntakeMessage, parse_intake
from calsync.core.producer.receipts import Receipt
from calsync.core.producer.submit import Intake

log = logging.getLogger(__name__)

MESSAGE_KEY_PREFIX: Final = "dramatiq-message:"  # request key of an intake message sent without a request_id


def submit_intake(intake: Intake, message: IntakeMessage, *, message_id: str | None) -> Receipt:
    """Save the message's change and fan out its sync jobs, once per request key: the message's request id, else
    its Dramatiq message id."""
    request_key = message.request_id or (MESSAGE_KEY_PREFIX + message_id if message_id else None)
    receipt = intake.submit(message.tenant_id, message.change, trace_id=message.trace_id, request_key=request_key)
    log.info(
        "intake message accepted",
        extra={"fields": {"tenant_id": message.tenant_id, "request_id": message.request_id, **receipt.as_json()}},
    )
    return receipt


def intake_actor(
    intake: Intake,
    delivery: Callable[[], str | None],
    on_parsed: Callable[[IntakeMessage], None] = lambda _: None,
) -> Callable[..., None]:
    """The function the intake actor runs; ``delivery`` tells the current message id, ``on_parsed`` sees the message."""

    def submit_change(*args: Any, **kwargs: Any) -> None:
        """Accept one change sent as a message: validate, save the intent, enqueue its sync jobs."""
        message = parse_intake(args, kwargs)
        on_parsed(message)
        submit_intake(intake, message, message_id=delivery())

    return submit_change

"""Payload validation: a corrupt payload or unknown schema goes to the DLQ at once, never retried."""

from __future__ import annotations

import dramatiq

from calsync.core.config.logging import bind_job
from calsync.core.model.errors import InvalidPayload
from calsync.core.model.payload import parse_payload
from calsync.core.model.vocabulary import DeadLetterCause, Outcome
from calsync.core.worker.context import JobContext, JobMiddleware, skip


class PayloadValidation(JobMiddleware):
    """Parses the payload once for every later middleware and the actor."""

    def before_job(self, broker: dramatiq.Broker, message: dramatiq.MessageProxy, ctx: JobContext) -> None:
        try:
            if message.kwargs:
                raise InvalidPayload("keyword arguments are not part of the job schema")
            ctx.payload = parse_payload(message.args)
        except InvalidPayload as exc:
            ctx.error = exc
            ctx.dead_letter_cause = DeadLetterCause.INVALID_PAYLOAD
            message.fail()
            raise skip(ctx, Outcome.DEAD_LETTERED) from None
        bind_job(ctx.log_fields())

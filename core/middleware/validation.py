"""Payload validation: a corrupt payload or unknown schema goes to the DLQ at once, never retried."""

from __future__ import annotations

import dramatiq

from core.errors import InvalidPayload
from core.logs import bind_job
from core.middleware.context import JobContext, JobMiddleware, skip
from core.payload import parse_payload


class PayloadValidation(JobMiddleware):
    """Parses the payload once for every later middleware and the actor."""

    def before_job(self, broker: dramatiq.Broker, message: dramatiq.MessageProxy, ctx: JobContext) -> None:
        try:
            if message.kwargs:
                raise InvalidPayload("keyword arguments are not part of the job schema")
            ctx.payload = parse_payload(message.args)
        except InvalidPayload as exc:
            ctx.error = exc
            message.fail()
            raise skip(ctx, "dead_lettered") from None
        bind_job(ctx.log_fields())

"""The intake message: a change sent as a Dramatiq message to actor ``submit_change`` (docs/PROTOCOL.md).

Its one positional argument is ``{"tenant_id", "change", "request_id"?, "trace_id"?}``. The worker
validates it, saves the intent and fans out the sync jobs, exactly as ``calsync.submit_change`` does
in a Python service. ``request_id`` shares the key space of HTTP's ``Idempotency-Key``: a retried
message with the same request id and change returns the first receipt and changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Final

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from calsync.core.model.change import Change
from calsync.core.model.content import STORABLE
from calsync.core.model.errors import InvalidChange, InvalidPayload
from calsync.core.model.ids import Identifier
from calsync.core.model.validation_wording import describe_validation_error

INTAKE_JOB: Final = "submit_change"

# Stored (intake_requests, dead letters) and logged: only characters every database stores (core/model/content.py).
RequestId = Annotated[str, StringConstraints(min_length=1, max_length=255), STORABLE]
TraceId = Annotated[str, StringConstraints(min_length=1, max_length=128), STORABLE]


class IntakeMessage(BaseModel):
    """A ``submit_change`` message's argument: who submits which change, under which request id."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tenant_id: Identifier = Field(description="The tenant submitting the change; its accounts are the only ones named.")
    change: Change = Field(description="The change, exactly as in change.schema.json.")
    request_id: RequestId | None = Field(
        default=None,
        description="Idempotency key (same key space as HTTP's Idempotency-Key): a resend returns the first receipt.",
    )
    trace_id: TraceId | None = Field(default=None, description="Correlation id carried into every job and log line.")

    def to_message_arg(self) -> dict[str, Any]:
        """JSON-ready form carried as the actor's single argument (unset optional fields left out)."""
        return self.model_dump(mode="json", exclude_none=True)


def parse_intake(args: Sequence[Any], kwargs: Mapping[str, Any]) -> IntakeMessage:
    """Read an intake message's argument: a bad change is an InvalidChange, a bad envelope an InvalidPayload."""
    if kwargs or not isinstance(args, list | tuple) or len(args) != 1 or not isinstance(args[0], dict):
        raise InvalidPayload("expected exactly one positional argument: {tenant_id, change, request_id?, trace_id?}")
    try:
        return IntakeMessage.model_validate(args[0])
    except ValidationError as exc:
        inside_change = all(
            err["loc"][:1] == ("change",) and (len(err["loc"]) > 1 or err["type"] != "missing") for err in exc.errors()
        )
        error = InvalidChange if inside_change else InvalidPayload
        raise error(describe_validation_error(exc)) from None

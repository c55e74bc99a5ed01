"""The job payload: a small message of references and a target version, never the event itself.

The worker reloads the latest state and decides from it, so a payload cannot go stale in a harmful
way. Its JSON Schema is exported to ``docs/schemas/job-payload.schema.json`` for producers written
in other languages (a test keeps the file current).
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Final, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError, model_validator

from calsync.core.model.errors import InvalidPayload
from calsync.core.model.ids import Identifier, new_id
from calsync.core.model.validation_wording import describe_validation_error

SYNC_JOB: Final = "sync_calendar_event"
Operation = Literal["create", "update", "delete"]

# Versions and attempts are stored in PostgreSQL ``integer`` columns: a payload beyond them is invalid
# (a clear permanent error naming the field) rather than a database error on every write.
STORED_INT_MAX: Final = 2**31 - 1
# The ids a payload carries, read best-effort from a rejected one so its log lines still name them.
PAYLOAD_IDS: Final = ("job_id", "trace_id", "tenant_id", "entity_id", "account_id", "idempotency_key")
_RAW_ID_LIMIT: Final = 128


def idempotency_key(tenant_id: str, entity_id: str, account_id: str, operation: Operation, version: int) -> str:
    """One key per logical effect and target: a create happens once, an update or delete once per version."""
    base = f"calendar:{tenant_id}:{entity_id}:{account_id}"
    return f"{base}:create" if operation == "create" else f"{base}:{operation}:v{version}"


VERIFY_SUFFIX: Final = ":verify"


def verification_key(key: str) -> str:
    """The key of the one delayed re-run of a delete that found no provider id (a create may land after it)."""
    return key + VERIFY_SUFFIX


class JobPayload(BaseModel):
    """A ``sync_calendar_event`` job, exactly the seed's fields plus ``account_id`` and ``target_version``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    job_id: Identifier
    job_type: Literal["sync_calendar_event"] = SYNC_JOB
    tenant_id: Identifier
    entity_id: Identifier
    account_id: Identifier
    operation: Operation
    target_version: int = Field(ge=1, le=STORED_INT_MAX, strict=True)
    idempotency_key: str = Field(min_length=1, max_length=512)
    attempt: int = Field(default=1, ge=1, le=STORED_INT_MAX, strict=True)
    scheduled_at: AwareDatetime
    trace_id: str = Field(min_length=1, max_length=128)

    @model_validator(mode="after")
    def _key_belongs_to_target(self) -> JobPayload:
        prefix = f"calendar:{self.tenant_id}:{self.entity_id}:{self.account_id}:"
        if not self.idempotency_key.startswith(prefix):
            raise ValueError(f"idempotency_key must start with {prefix!r}")
        return self

    def next_attempt(self, delay_seconds: float) -> JobPayload:
        """The same job, one attempt later, due after ``delay_seconds``."""
        due = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=delay_seconds)
        return self.model_copy(update={"attempt": self.attempt + 1, "scheduled_at": due})

    def to_message_arg(self) -> dict[str, Any]:
        """JSON-ready form carried as the actor's single argument."""
        return self.model_dump(mode="json")


def new_payload(
    *,
    tenant_id: str,
    entity_id: str,
    account_id: str,
    operation: Operation,
    version: int,
    trace_id: str,
    key: str | None = None,
) -> JobPayload:
    """A first-attempt payload due now, with a fresh job id."""
    return JobPayload(
        job_id=new_id("job"),
        tenant_id=tenant_id,
        entity_id=entity_id,
        account_id=account_id,
        operation=operation,
        target_version=version,
        idempotency_key=key or idempotency_key(tenant_id, entity_id, account_id, operation, version),
        scheduled_at=dt.datetime.now(dt.UTC),
        trace_id=trace_id,
    )


def raw_ids(raw: Any) -> dict[str, str]:
    """The ids a raw payload carries, as far as they can be read (bounded strings), whatever else is wrong."""
    if isinstance(raw, list | tuple) and len(raw) == 1:
        raw = raw[0]
    found = {name: raw.get(name) for name in PAYLOAD_IDS} if isinstance(raw, dict) else {}
    return {
        name: str(value)[:_RAW_ID_LIMIT]
        for name, value in found.items()
        if isinstance(value, str | int) and not isinstance(value, bool) and str(value)
    }


def parse_payload(args: Any) -> JobPayload:
    """Read a payload from a message's positional args; anything else is an InvalidPayload (dead-lettered)."""
    if not isinstance(args, list | tuple) or len(args) != 1 or not isinstance(args[0], dict):
        raise InvalidPayload("expected exactly one positional argument: the job payload object", ids=raw_ids(args))
    try:
        return JobPayload.model_validate(args[0])
    except ValidationError as exc:
        raise InvalidPayload(describe_validation_error(exc), ids=raw_ids(args)) from None

"""The JSON documents of the jobs, target search and account routes (``/v1/jobs``, ``GET /v1/events``,
``/v1/accounts``): the HTTP twins of the operator console's actions."""

from __future__ import annotations

import datetime as dt
from typing import Literal

from pydantic import AwareDatetime, BaseModel, Field

from calsync.core.api.models import DeadLetterOut, DiscardRequest, PageQuery, TargetOut
from calsync.core.model.calendar import AccountStatus, ProviderName
from calsync.core.model.ids import Identifier
from calsync.core.model.vocabulary import JobState
from calsync.core.store.accounts import AccountSummary
from calsync.core.store.job_lookup import FoundJob, state_of
from calsync.core.store.targets import TargetRow

_STATE = (
    "pending: queued and due; deferred: waiting without using an attempt (a busy lock, traffic control, an enqueue "
    "that failed); retrying: waiting to retry after a temporary failure; synced: shown (or removed) as wanted; "
    "dead-lettered: in the DLQ (an operator's cancel included)."
)


class TargetHit(TargetOut):
    """One target found by ``GET /v1/events``: its event, its state and its latest job."""

    entity_id: str
    state: JobState = Field(description=_STATE)
    job_id: str | None = Field(description="The target's latest job (null: written before this field existed).")

    @classmethod
    def of(cls, row: TargetRow) -> TargetHit:
        """From a stored target."""
        return cls.model_validate({**row.as_json(), "entity_id": row.event_id, "state": state_of(row),
                                   "job_id": row.job_id})  # fmt: skip


class TargetPage(BaseModel):
    """One page of targets, newest ``updated_at`` first; pass ``next_cursor`` as ``cursor`` for the next page."""

    items: list[TargetHit]
    next_cursor: str | None


class TargetQuery(PageQuery):
    """The filters and page of ``GET /v1/events`` (every one given must hold; an unknown parameter is refused)."""

    state: JobState | None = Field(default=None, description=_STATE)
    account_id: Identifier | None = None
    entity_id: Identifier | None = None
    provider: ProviderName | None = None
    since: AwareDatetime | None = Field(default=None, description="Targets updated at or after this time (RFC 3339).")
    until: AwareDatetime | None = Field(default=None, description="Targets updated before this time (RFC 3339).")
    # A keyset of a time and two identifiers: longer than a record id's.
    cursor: str | None = Field(default=None, max_length=512, description="next_cursor of the previous page.")


class JobOut(BaseModel):
    """What calsync knows of a job: its target while it is the target's latest job, and its dead letter if any."""

    job_id: str
    state: JobState = Field(description=_STATE)
    entity_id: str | None = Field(description="Null only for a dead letter that names none (a quarantined message).")
    account_id: str | None
    target: TargetOut | None = Field(
        description="The target's sync state while this is its latest job (wait reason, due time, last error); "
        "null once a newer job (a DLQ replay) took the target over."
    )
    attempts: int | None = Field(description="Attempts used, as its dead letter records (null: not dead-lettered).")
    dead_letter: DeadLetterOut | None

    @classmethod
    def of(cls, found: FoundJob) -> JobOut:
        """From what the store found."""
        row, record = found.target, found.dead_letter
        return cls(
            job_id=found.job_id,
            state=found.state,
            entity_id=row.event_id if row else record.entity_id if record else None,
            account_id=row.account_id if row else record.account_id if record else None,
            target=TargetOut.model_validate(row.as_json()) if row else None,
            attempts=record.attempts if record else None,
            dead_letter=DeadLetterOut.model_validate(record.as_json()) if record else None,
        )


class CancelRequest(DiscardRequest):
    """Why the job is cancelled (kept in its dead letter's ``last_error``)."""


class CancelledOut(BaseModel):
    """The job's target is dead-lettered: replay its record to run the change after all."""

    job_id: str
    state: Literal["dead-lettered"]
    dead_letter: DeadLetterOut


class AccountOut(BaseModel):
    """An account of the key's tenant, without its credentials."""

    account_id: str
    provider: ProviderName
    address: str
    status: AccountStatus
    has_credentials: bool
    created_at: dt.datetime
    updated_at: dt.datetime

    @classmethod
    def of(cls, summary: AccountSummary) -> AccountOut:
        """From the stored account."""
        return cls.model_validate(summary.as_json())

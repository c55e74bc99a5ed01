"""The JSON documents of the HTTP API (the request body of ``POST /v1/changes`` is the model's :class:`Change`).

Those of the jobs, target search and account routes are the HTTP twins of the operator console's actions."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Annotated, Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, model_validator

from calsync.core.model.calendar import AccountStatus, BusinessStatus, EventState, ProviderName, SendUpdates
from calsync.core.model.drift import DriftKind
from calsync.core.model.ids import Identifier
from calsync.core.model.vocabulary import DeadLetterKind, JobState, SyncStatus, WaitReason
from calsync.core.store.job_lookup import FoundJob, state_of
from calsync.core.store.targets import TargetRow

MAX_REPLAY = 1000
MAX_RECORD_ID = 2**31 - 1  # the column is a 32-bit integer


class ReceiptOut(BaseModel):
    """Answer to an accepted change: the intent is committed; jobs are enqueued (or deferred to the reconciler)."""

    entity_id: str
    version: int
    job_ids: list[str]
    deferred_accounts: list[str] = Field(
        description="Accounts whose job could not be enqueued after the commit; the reconciler enqueues them."
    )


class TargetOut(BaseModel):
    """The sync state of the event in one account."""

    account_id: str
    wanted: Literal["present", "absent"]
    status: SyncStatus
    wanted_version: int
    synced_version: int
    external_id: str | None
    last_error: str | None = Field(description="The provider's last error for this target (redacted), kept while "
                                   "it waits and when it failed; null once synced.")  # fmt: skip
    error_class: str | None = Field(description="The class of that error, e.g. ProviderUnavailable.")
    wait_reason: WaitReason | None = Field(
        description="Why a pending target waits until `due_at`: a `retry` after a temporary failure, `lock busy`, a "
        "hold of traffic control (a limit, a back-off, an open breaker, an outage), or `not enqueued`; null otherwise."
    )
    due_at: dt.datetime | None = Field(description="When a pending target's job is due (for a waiting one: until when "
                                       "it waits, as last noted).")  # fmt: skip
    updated_at: dt.datetime
    verified_at: dt.datetime | None = Field(description="When a drift sweep last compared the provider's item with "
                                            "this target; null until one did.")  # fmt: skip
    drift_kind: DriftKind | None = Field(description="What that sweep found (docs/PROTOCOL.md, \"Drift\"); null when "
                                         "it found the item as calsync wrote it.")  # fmt: skip


class EventOut(BaseModel):
    """An event's business state and the sync state of each of its targets."""

    entity_id: str
    version: int
    status: BusinessStatus
    title: str
    start: str
    end: str
    time_zone: str
    all_day: bool
    location: str | None
    description: str | None
    attendees: list[str]
    send_updates: SendUpdates
    targets: list[TargetOut]

    @classmethod
    def of(cls, event: EventState, rows: list[TargetRow]) -> EventOut:
        """From the stored event and its targets."""
        times = {"start": event.start.isoformat(), "end": event.end.isoformat()}
        targets = [TargetOut.model_validate(row.as_json()) for row in rows]
        return cls.model_validate({**dataclasses.asdict(event), **times, "entity_id": event.id, "targets": targets})


class DeadLetterOut(BaseModel):
    """One dead letter of the key's tenant."""

    id: int
    kind: DeadLetterKind
    status: Literal["open", "replayed", "discarded"]
    job_id: str
    job_type: str
    entity_id: str | None
    account_id: str | None
    reason: str
    cause: str
    error_class: str
    last_error: str
    attempts: int
    error_history: list[dict[str, Any]]
    payload: Any
    trace_id: str | None
    first_failed_at: dt.datetime
    failed_at: dt.datetime
    replayed_at: dt.datetime | None
    replay_job_id: str | None
    discarded_at: dt.datetime | None
    note: str | None


class DeadLetterPage(BaseModel):
    """One page of dead letters, oldest first; pass ``next_cursor`` as ``cursor`` for the next page."""

    items: list[DeadLetterOut]
    next_cursor: str | None


class DeadLetterSelection(BaseModel):
    """Which open dead letters of the tenant to replay (all given conditions must hold)."""

    model_config = ConfigDict(extra="forbid")

    account_id: Identifier | None = None
    entity_id: Identifier | None = None
    reason: str | None = Field(default=None, max_length=128)
    error_class: str | None = Field(default=None, max_length=128)
    job_type: str | None = Field(default=None, max_length=64)
    kind: DeadLetterKind | None = None
    provider: ProviderName | None = Field(default=None, description="The provider of the record's account.")
    q: str | None = Field(
        default=None, min_length=1, max_length=200, pattern=r"^[^\x00]+$",
        description="A case-insensitive substring of the last error, taken literally (no wildcards).",
    )  # fmt: skip


class PageQuery(BaseModel):
    """The page of a list read in keyset pages (core/api/cursors.py): how many items, and after which."""

    model_config = ConfigDict(extra="forbid")  # an unknown parameter is refused, not ignored

    limit: int = Field(default=100, ge=1, le=500)
    cursor: str | None = Field(default=None, max_length=64, description="next_cursor of the previous page.")


class DeadLetterQuery(PageQuery, DeadLetterSelection):
    """The filters and page of ``GET /v1/dead-letters`` (an unknown parameter is refused, not ignored)."""

    status: Literal["open", "replayed", "discarded", "all"] = "open"


class ReplayRequest(BaseModel):
    """Replay (or discard) by ids or by a filter (exactly one of the two)."""

    model_config = ConfigDict(extra="forbid")

    ids: list[Annotated[int, Field(ge=1, le=MAX_RECORD_ID)]] | None = Field(
        default=None, min_length=1, max_length=MAX_REPLAY
    )
    filter: DeadLetterSelection | None = None

    @model_validator(mode="after")
    def _one_selection(self) -> ReplayRequest:
        if (self.ids is None) == (self.filter is None):
            raise ValueError("give exactly one of ids or filter")
        return self


class DiscardRequest(BaseModel):
    """Why the record is dropped (kept on the record)."""

    model_config = ConfigDict(extra="forbid")

    note: str | None = Field(default=None, max_length=1000)


class DiscardSetRequest(ReplayRequest):
    """Discard by ids or by a filter, and why (kept on each record)."""

    note: str | None = Field(default=None, max_length=1000)


class DiscardedOut(BaseModel):
    """The record is closed without a replay."""

    id: int
    status: Literal["discarded"]


class Health(BaseModel):
    """A probe's answer; ``checks`` names each dependency readiness looked at."""

    status: Literal["ok"]
    checks: dict[str, Literal["ok"]] = Field(default_factory=dict)


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

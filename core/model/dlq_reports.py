"""What a dead-letter replay or discard did, per record (core/producer/dead_letters.py): one model each, the answers
of ``POST /v1/dead-letters/replay`` and ``.../discard`` as they are, and what ``calsync dlq`` prints. Here, below
the producer and the HTTP API, so both use the same classes (their ``...Out`` names are the OpenAPI components)."""

from __future__ import annotations

from pydantic import BaseModel


class ReplayedOut(BaseModel):
    """A record re-enqueued under a new job id (``deferred``: the enqueue failed; the reconciler retries it)."""

    id: int
    job_id: str
    deferred: bool = False


class SkippedOut(BaseModel):
    """A record not replayed, and why."""

    id: int
    job_id: str | None
    why: str


class ReplayReportOut(BaseModel):
    """What a replay did, per record."""

    replayed: list[ReplayedOut]
    skipped: list[SkippedOut]


class DiscardedEntryOut(BaseModel):
    """A record closed without a replay."""

    id: int
    job_id: str | None


class DiscardReportOut(BaseModel):
    """What a discard did, per record."""

    discarded: list[DiscardedEntryOut]
    skipped: list[SkippedOut]

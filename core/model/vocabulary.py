"""The pipeline's closed vocabularies, each defined once: job outcomes, sync statuses, process roles,
dead-letter causes. Logs, Redis counters, metric labels, the DLQ and ``calsync status`` all spell them
from here."""

from __future__ import annotations

from enum import StrEnum
from typing import Final, Literal, get_args

from calsync.core.model.errors import InvalidPayload, reason_of


class Outcome(StrEnum):
    """How one delivery of a job ended (``calsync_jobs_total{outcome}``, the per-minute counters)."""

    SUCCESS = "success"
    ALREADY_DONE = "already_done"
    STALE = "stale"
    RETRY_SCHEDULED = "retry_scheduled"
    LOCK_BUSY = "lock_busy"  # the target's lock is held: waits again (bounded by LOCK_MAX_WAITS)
    DEFERRED = "deferred"  # held by traffic control (limits, back-off, circuit breaker): no attempt used
    DEAD_LETTERED = "dead_lettered"


SyncStatus = Literal["pending", "synced", "failed", "deleted"]
SYNC_STATUSES: Final[tuple[SyncStatus, ...]] = get_args(SyncStatus)

Role = Literal["worker", "producer", "cli"]

# A dead letter is a job that failed for good, or a message quarantined because it is not a job at all.
DeadLetterKind = Literal["job", "quarantined"]
DEAD_LETTER_KINDS: Final[tuple[DeadLetterKind, ...]] = get_args(DeadLetterKind)

# What an HTTP API key may do: submit changes, read state, or also operate the DLQ.
ApiScope = Literal["submit", "read", "admin"]
API_SCOPES: Final[tuple[ApiScope, ...]] = get_args(ApiScope)

# Which queue a sync job takes: the normal one, or the bulk lane of a tenant over its enqueue rate.
Lane = Literal["normal", "bulk"]
LANES: Final[tuple[Lane, ...]] = get_args(Lane)


class DeadLetterCause(StrEnum):
    """Why a message went to the dead-letter queue."""

    PERMANENT = "permanent"  # a PermanentError: retrying cannot help
    EXHAUSTED = "exhausted"  # a temporary error outlived the retry schedule
    ENQUEUE_FAILED = "enqueue_failed"  # the next attempt could not be enqueued
    UNKNOWN_ACTOR = "unknown_actor"  # no actor of that name in this worker
    INVALID_PAYLOAD = "invalid_payload"  # the message is not a job of a schema we know
    QUARANTINED = "quarantined"  # the bytes on the queue are no runnable message (kind 'quarantined')

    def reason(self, error: BaseException | None) -> str:
        """The DLQ record's ``reason`` and the ``calsync_dead_letters_total{reason}`` label: one text for both."""
        if self is DeadLetterCause.PERMANENT:
            return reason_of(error) if error is not None else "permanent failure"
        if self is DeadLetterCause.QUARANTINED:
            return f"{_QUARANTINED}: {getattr(error, 'refusal', 'malformed')}"
        return _REASONS[self]

    def detail(self, attempts: int) -> str | None:
        """What the DLQ record's ``last_error`` adds after the error's own message."""
        if self is DeadLetterCause.EXHAUSTED:
            return f"retries exhausted after {attempts} attempts"
        if self is DeadLetterCause.ENQUEUE_FAILED:
            return "the retry could not be enqueued"
        return None


_REASONS: Final = {
    DeadLetterCause.EXHAUSTED: "retries exhausted",
    DeadLetterCause.ENQUEUE_FAILED: "retry enqueue failed",
    DeadLetterCause.UNKNOWN_ACTOR: "unknown actor",
    DeadLetterCause.INVALID_PAYLOAD: InvalidPayload.reason,
}
_CAUSES_BY_REASON: Final = {reason: cause for cause, reason in _REASONS.items()}
_QUARANTINED: Final = "quarantined"


class Refusal(StrEnum):
    """Why a message was quarantined instead of run (the DLQ reason is ``quarantined: <refusal>``)."""

    TOO_LARGE = "too large"
    NOT_UTF8 = "not UTF-8"
    NOT_JSON = "not JSON"
    NOT_ENVELOPE = "not a message envelope"
    WRONG_QUEUE = "wrong queue"
    UNKNOWN_ACTOR = "unknown actor"
    BAD_ARGUMENTS = "arguments do not fit the actor"
    BAD_OPTION = "bad option"
    BROKER_ID = "broker message id mismatch"
    NO_BODY = "no body"


def cause_of_reason(reason: str) -> DeadLetterCause:
    """The cause a stored DLQ ``reason`` states (every reason that is not one of the causes' own is permanent)."""
    if reason.startswith(_QUARANTINED + ":"):
        return DeadLetterCause.QUARANTINED
    return _CAUSES_BY_REASON.get(reason, DeadLetterCause.PERMANENT)

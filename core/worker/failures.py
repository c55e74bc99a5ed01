"""What the retry and dead-letter middlewares both say about a failure: its history entry, its cause, and why a
job that runs again later waits."""

from __future__ import annotations

import datetime as dt
from typing import Any, Final

from dramatiq.errors import ActorNotFound

from calsync.core.model.errors import Deferred, InvalidPayload, MalformedMessage, PermanentError, error_class_of
from calsync.core.model.payload import STORED_INT_MAX
from calsync.core.model.redaction import redact
from calsync.core.model.vocabulary import DeadLetterCause, WaitReason, as_wait_reason

HISTORY_LIMIT: Final = 20
MESSAGE_LIMIT: Final = 1000
RETRIES_OPTION: Final = "retries"  # message option: failed attempts so far (Dramatiq's own name for it)
ERRORS_OPTION: Final = "errors"  # message option: the error history, one entry per failed attempt


class UnknownActor(PermanentError):
    """A message named an actor this worker does not define."""

    reason = "unknown actor"


def count_option(options: dict[str, Any], name: str) -> int:
    """A counting message option (retries, deferrals) as a bounded int; a foreign producer's junk reads as 0."""
    value = options.get(name, 0)
    if not isinstance(value, int) or isinstance(value, bool):
        return 0
    return min(max(value, 0), STORED_INT_MAX)


def history_option(options: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``errors`` option as a list of entries; anything else a producer put there is ignored."""
    value = options.get(ERRORS_OPTION)
    if not isinstance(value, list):
        return []
    return [entry for entry in value if isinstance(entry, dict)][-HISTORY_LIMIT:]


def error_message(error: BaseException) -> str:
    """An error's message as stored (target rows, DLQ records, histories): redacted and bounded."""
    return redact(str(error))[:MESSAGE_LIMIT]


def error_entry(attempt: int, error: BaseException) -> dict[str, Any]:
    """One line of a job's error history (the ``errors`` message option, the DLQ record's history)."""
    return {
        "attempt": attempt,
        "at": dt.datetime.now(dt.UTC).isoformat(),
        "error_class": error_class_of(error),
        "message": error_message(error),
    }


def wait_reason_of(error: BaseException) -> WaitReason:
    """Why a job that ran again later waits: its deferral's reason (a busy lock, a hold of traffic control), or a retry
    after a temporary failure."""
    if isinstance(error, Deferred):
        return as_wait_reason(error.reason)
    return "retry"


def provider_error_of(error: BaseException) -> BaseException | None:
    """The failure behind a retry or a hold: the error itself for a retry, the provider's failure a hold was excused
    for (its cause); None for a deferral no call caused (a busy lock, a limit, an open breaker)."""
    if not isinstance(error, Deferred):
        return error
    cause = error.__cause__
    return cause if isinstance(cause, Exception) and not isinstance(cause, Deferred) else None


def rejection_cause(error: BaseException | None) -> DeadLetterCause:
    """The cause of a rejection that no retry decision explains (no error: Dramatiq found no actor)."""
    if error is None or isinstance(error, UnknownActor | ActorNotFound):
        return DeadLetterCause.UNKNOWN_ACTOR
    if isinstance(error, MalformedMessage):
        return DeadLetterCause.QUARANTINED
    return DeadLetterCause.INVALID_PAYLOAD if isinstance(error, InvalidPayload) else DeadLetterCause.PERMANENT

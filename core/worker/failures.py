"""What the retry and dead-letter middlewares both say about a failure: its history entry and its cause."""

from __future__ import annotations

import datetime as dt
from typing import Any, Final

from dramatiq.errors import ActorNotFound

from calsync.core.model.errors import InvalidPayload, PermanentError, error_class_of
from calsync.core.model.redaction import redact
from calsync.core.model.vocabulary import DeadLetterCause

HISTORY_LIMIT: Final = 20
MESSAGE_LIMIT: Final = 1000
RETRIES_OPTION: Final = "retries"  # message option: failed attempts so far (Dramatiq's own name for it)
ERRORS_OPTION: Final = "errors"  # message option: the error history, one entry per failed attempt


class UnknownActor(PermanentError):
    """A message named an actor this worker does not define."""

    reason = "unknown actor"


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


def rejection_cause(error: BaseException | None) -> DeadLetterCause:
    """The cause of a rejection that no retry decision explains (no error: Dramatiq found no actor)."""
    if error is None or isinstance(error, UnknownActor | ActorNotFound):
        return DeadLetterCause.UNKNOWN_ACTOR
    return DeadLetterCause.INVALID_PAYLOAD if isinstance(error, InvalidPayload) else DeadLetterCause.PERMANENT

"""What the retry and dead-letter middlewares both say about a failure: its history entry, its cause, and
why a job that runs again later waits.

A history entry says whether its attempt sent any request to the provider (``provider_io``, counted by the
traffic gate: core/model/provider_io.py). The same error on two attempts in a row, neither of which did, is
calsync's own bug (:func:`is_worker_bug`): retrying the same code on the same data fails the same way, so it is
dead-lettered as ``worker bug`` instead of walking the whole schedule. Outages of calsync's own parts
(database, Redis, broker, a time limit) pass, so they keep the schedule.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Final

import redis
import sqlalchemy.exc
from dramatiq.errors import ActorNotFound, BrokerConnectionError
from dramatiq.middleware import Interrupt

from calsync.core.model.errors import (
    Deferred,
    InvalidPayload,
    LockBusy,
    MalformedMessage,
    PermanentError,
    StoreUnavailable,
    error_class_of,
)
from calsync.core.model.payload import STORED_INT_MAX
from calsync.core.model.redaction import redact
from calsync.core.model.vocabulary import DeadLetterCause, WaitReason, as_wait_reason

HISTORY_LIMIT: Final = 20
MESSAGE_LIMIT: Final = 1000
RETRIES_OPTION: Final = "retries"  # message option: failed attempts so far (Dramatiq's own name for it)
ERRORS_OPTION: Final = "errors"  # message option: the error history, one entry per failed attempt
PROVIDER_IO: Final = "provider_io"  # history entry: whether the attempt sent any request to its provider

#: The database is down (try again later), as opposed to refusing what was written (the DLQ then stores it degraded).
STORE_DOWN: Final = (StoreUnavailable, sqlalchemy.exc.TimeoutError, sqlalchemy.exc.InterfaceError, OSError)
#: Failures of calsync's own infrastructure, which pass: retried on the schedule even without provider I/O.
OWN_OUTAGES: Final = (*STORE_DOWN, LockBusy, redis.RedisError, BrokerConnectionError, Interrupt)


class UnknownActor(PermanentError, reason="unknown actor"):
    """A message named an actor this worker does not define."""


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


def error_entry(attempt: int, error: BaseException, *, provider_io: bool | None = None) -> dict[str, Any]:
    """One line of a job's error history (the ``errors`` message option, the DLQ record's history)."""
    entry: dict[str, Any] = {
        "attempt": attempt,
        "at": dt.datetime.now(dt.UTC).isoformat(),
        "error_class": error_class_of(error),
        "message": error_message(error),
    }
    if provider_io is not None:
        entry[PROVIDER_IO] = provider_io
    return entry


def is_worker_bug(history: list[dict[str, Any]], entry: dict[str, Any], error: BaseException) -> bool:
    """Whether ``entry`` (this attempt's failure) repeats the one before it in ``history``, neither with provider I/O.

    Not for an outage of calsync's own parts (:data:`OWN_OUTAGES`), nor when an entry does not say whether its
    attempt reached the provider (a message from before this rule): the schedule decides those.
    """
    if entry.get(PROVIDER_IO) is not False or isinstance(error, OWN_OUTAGES) or not history:
        return False
    last = history[-1]
    same = last.get("error_class") == entry["error_class"] and last.get("message") == entry["message"]
    return same and last.get(PROVIDER_IO) is False and last.get("attempt") == entry["attempt"] - 1


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

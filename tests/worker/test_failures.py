"""What the retry and dead-letter middlewares store about a failure: bounded, redacted messages and causes."""

from __future__ import annotations

import secrets

import pytest
import redis
from dramatiq.errors import ActorNotFound

from calsync.core.model.errors import Forbidden, InvalidPayload, ProviderUnavailable, StoreUnavailable, TemporaryError
from calsync.core.model.redaction import MASK, register_secrets
from calsync.core.model.vocabulary import DeadLetterCause
from calsync.core.worker.failures import (
    MESSAGE_LIMIT,
    UnknownActor,
    error_entry,
    error_message,
    is_worker_bug,
    rejection_cause,
)


def test_a_stored_error_message_is_redacted_and_bounded() -> None:
    secret = f"tok-{secrets.token_hex(8)}"
    register_secrets({"refresh_token": secret})
    error = ProviderUnavailable(f"503 for {secret} " + "x" * (2 * MESSAGE_LIMIT))
    stored = error_message(error)
    assert len(stored) == MESSAGE_LIMIT and secret not in stored and stored.startswith(f"503 for {MASK} x")


def test_a_history_entry_names_the_attempt_and_class_and_hides_secrets() -> None:
    secret = f"tok-{secrets.token_hex(8)}"
    register_secrets([secret])
    entry = error_entry(3, Forbidden(f"denied for {secret}"))
    assert (entry["attempt"], entry["error_class"], entry["message"]) == (3, "Forbidden", f"denied for {MASK}")


@pytest.mark.parametrize(
    ("error", "cause"),
    [
        (None, DeadLetterCause.UNKNOWN_ACTOR),
        (UnknownActor("no actor named 'x'"), DeadLetterCause.UNKNOWN_ACTOR),
        (ActorNotFound("x"), DeadLetterCause.UNKNOWN_ACTOR),
        (InvalidPayload("not a payload"), DeadLetterCause.INVALID_PAYLOAD),
        (Forbidden("denied"), DeadLetterCause.PERMANENT),
    ],
    ids=["no error", "unknown actor", "dramatiq's actor not found", "invalid payload", "permanent"],
)
def test_a_rejection_names_its_cause(error: BaseException | None, cause: DeadLetterCause) -> None:
    assert rejection_cause(error) is cause


def _entries(
    first: BaseException, second: BaseException, io: tuple[bool | None, bool | None], attempts: tuple[int, int]
) -> tuple[list[dict[str, object]], dict[str, object]]:
    return [error_entry(attempts[0], first, provider_io=io[0])], error_entry(attempts[1], second, provider_io=io[1])


_SAME = OverflowError("date value out of range")
_CLASSIFIED = TemporaryError("Graph upsert for a@b.c failed (anything else): OverflowError: date value out of range")
BUG_CASES = [
    pytest.param(_SAME, _SAME, (False, False), (1, 2), True, id="same error twice"),
    pytest.param(_CLASSIFIED, _CLASSIFIED, (False, False), (3, 4), True, id="classified as temporary"),
    pytest.param(_SAME, _SAME, (True, False), (1, 2), False, id="first reached the provider"),
    pytest.param(_SAME, _SAME, (False, True), (1, 2), False, id="second reached it"),
    pytest.param(_SAME, _SAME, (None, False), (1, 2), False, id="first from before the rule"),
    pytest.param(_SAME, OverflowError("other"), (False, False), (1, 2), False, id="other message"),
    pytest.param(_SAME, ValueError(str(_SAME)), (False, False), (1, 2), False, id="other class"),
    pytest.param(_SAME, _SAME, (False, False), (1, 3), False, id="not consecutive"),
    pytest.param(StoreUnavailable("down"), StoreUnavailable("down"), (False, False), (1, 2), False, id="database"),
    pytest.param(ConnectionRefusedError(), ConnectionRefusedError(), (False, False), (1, 2), False, id="network"),
    pytest.param(redis.ConnectionError(), redis.ConnectionError(), (False, False), (1, 2), False, id="redis"),
]


@pytest.mark.parametrize(("first", "second", "io", "attempts", "bug"), BUG_CASES)
def test_only_the_same_error_on_consecutive_attempts_without_provider_io_is_a_worker_bug(
    first: BaseException,
    second: BaseException,
    io: tuple[bool | None, bool | None],
    attempts: tuple[int, int],
    bug: bool,
) -> None:
    history, entry = _entries(first, second, io, attempts)
    assert is_worker_bug(history, entry, second) is bug
    assert not is_worker_bug([], entry, second)  # a first failure never is

"""What the retry and dead-letter middlewares store about a failure: bounded, redacted messages and causes."""

from __future__ import annotations

import secrets

import pytest
from dramatiq.errors import ActorNotFound

from calsync.core.model.errors import Forbidden, InvalidPayload, ProviderUnavailable
from calsync.core.model.redaction import MASK, register_secrets
from calsync.core.model.vocabulary import DeadLetterCause
from calsync.core.worker.failures import MESSAGE_LIMIT, UnknownActor, error_entry, error_message, rejection_cause


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

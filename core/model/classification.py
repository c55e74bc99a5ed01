"""The shape of every adapter's classification table: a failure reduced to primitives, and the rows it is
matched against, first match wins. Each adapter keeps its own table (its ``CLASSIFICATION``) and its own
``describe``, which maps its library's exceptions to a :class:`Failure` at that one boundary."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from calsync.core.model.errors import CalsyncError
from calsync.core.model.redaction import redact

MESSAGE_LIMIT = 300


@dataclass(frozen=True)
class Failure:
    """What a classifier knows about one failed call (never the request or its headers).

    ``codes`` are the provider's machine reasons (Google's ``errors[].reason``, Graph/Entra error codes).
    """

    exc: BaseException
    status: int | None
    codes: frozenset[str]
    message: str
    retry_after: float | None

    def detail(self) -> str:
        """The failure as one line: status, codes, then the provider's message."""
        status = f"HTTP {self.status} " if self.status is not None else ""
        codes = ",".join(sorted(self.codes))
        return f"{status}{codes + ': ' if codes else ''}{self.message}"


@dataclass(frozen=True)
class Row:
    """One line of a classification table: which failures it covers and the error they become."""

    name: str
    error: type[CalsyncError]
    kinds: tuple[type[BaseException], ...]
    statuses: Collection[int] | None = None
    codes: tuple[str, ...] = ()
    # A floor for the retry delay when the provider gives none (e.g. a daily quota).
    retry_after: float | None = None
    # A fragment the provider's message must contain (case-insensitive), for errors told apart only by text.
    text: str | None = None

    def matches(self, failure: Failure) -> bool:
        """True when the failure's type, HTTP status, any of its codes and the text fragment fit this row."""
        if not isinstance(failure.exc, self.kinds):
            return False
        if self.statuses is not None and failure.status not in self.statuses:
            return False
        if self.codes and failure.codes.isdisjoint(self.codes):
            return False
        return self.text is None or self.text.lower() in failure.message.lower()


def first_row(table: Sequence[Row], failure: Failure) -> Row:
    """The row a failure falls under (every table ends with a catch-all row)."""
    return next(row for row in table if row.matches(failure))


def scrubbed_message(text: str, secrets: Iterable[str]) -> str:
    """A classified error's message: secrets redacted, bounded for the DLQ and logs."""
    message = redact(text, tuple(secrets))
    return message if len(message) <= MESSAGE_LIMIT else message[: MESSAGE_LIMIT - 1] + "…"

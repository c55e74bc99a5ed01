"""The shape of every adapter's classification table: a failure reduced to primitives, and the rows it is
matched against, first match wins. Each adapter keeps its own table (its ``CLASSIFICATION``) and its own
``describe``, which maps its library's exceptions to a :class:`Failure` at that one boundary;
:func:`classify_failure` turns the failure into its row's error."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from calsync.core.model.errors import CalsyncError, PermanentError
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
    # Whether the failure's own retry hint counts: not where a library's own retry delay arrives as one (EWS).
    provider_hint: bool = True

    def matches(self, failure: Failure) -> bool:
        """True when the failure's type, HTTP status, any of its codes and the text fragment fit this row."""
        if not isinstance(failure.exc, self.kinds):
            return False
        if self.statuses is not None and failure.status not in self.statuses:
            return False
        if self.codes and failure.codes.isdisjoint(self.codes):
            return False
        return self.text is None or self.text.lower() in failure.message.lower()


def classify_failure(table: Sequence[Row], failure: Failure, subject: str, secrets: Iterable[str]) -> CalsyncError:
    """The error of the first row the failure falls under (every table ends with a catch-all row), its message
    ``<subject> failed (<row>): <detail>`` with secrets redacted and bounded for the DLQ and logs. Any but a permanent
    error carries the longer of the provider's retry hint and the row's floor."""
    row = next(row for row in table if row.matches(failure))
    message = redact(f"{subject} failed ({row.name}): {failure.detail()}", tuple(secrets))
    if len(message) > MESSAGE_LIMIT:
        message = message[: MESSAGE_LIMIT - 1] + "…"
    if issubclass(row.error, PermanentError):
        return row.error(message)
    provided = failure.retry_after if row.provider_hint else None
    hints = [hint for hint in (provided, row.retry_after) if hint is not None]
    return row.error(message, retry_after=max(hints, default=None))

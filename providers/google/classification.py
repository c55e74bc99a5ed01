"""The one table of Google failures: which are temporary, which permanent, and the calsync error each becomes."""

from __future__ import annotations

import fnmatch
import http.client
import json
from collections.abc import Collection
from dataclasses import dataclass

import httplib2
from google.auth.exceptions import RefreshError, TransportError
from googleapiclient.errors import HttpError

from calsync.core.model.errors import (
    AuthRevoked,
    CalsyncError,
    EntityNotFound,
    Forbidden,
    InvalidRequest,
    ProviderTimeout,
    ProviderUnavailable,
    RateLimited,
    TemporaryError,
)
from calsync.core.model.redaction import redact
from calsync.core.model.retry_after import parse_retry_after

QUOTA_RETRY_AFTER = 3600.0
_MESSAGE_LIMIT = 300


@dataclass(frozen=True)
class Failure:
    """What the classifier knows about one failed call, reduced to primitives (never the request or its headers)."""

    exc: BaseException
    status: int | None
    codes: frozenset[str]
    message: str
    retry_after: float | None


@dataclass(frozen=True)
class Row:
    """One line of :data:`CLASSIFICATION`: which failures it covers and the error they become."""

    name: str
    error: type[CalsyncError]
    kinds: tuple[type[BaseException], ...]
    statuses: Collection[int] | None = None
    codes: tuple[str, ...] = ()
    retry_after: float | None = None

    def matches(self, failure: Failure) -> bool:
        """True when the failure's type, HTTP status and any of its codes (glob patterns) fit this row."""
        if not isinstance(failure.exc, self.kinds):
            return False
        if self.statuses is not None and failure.status not in self.statuses:
            return False
        return not self.codes or any(fnmatch.fnmatchcase(c, p) for c in failure.codes for p in self.codes)


#: First matching row wins. ``codes`` are matched against Google's ``errors[].reason``, ``details[].reason``
#: and ``error.status`` of an API error, or the OAuth ``error`` of a token-endpoint refusal
#: (docs/notes/google-calendar.md, "Errors").
CLASSIFICATION: tuple[Row, ...] = (
    Row("429 too many requests", RateLimited, (HttpError,), {429}),
    Row(
        "403 rate limit",
        RateLimited,
        (HttpError,),
        {403},
        ("rateLimitExceeded", "userRateLimitExceeded", "RATE_LIMIT_EXCEEDED"),
    ),
    # Calendar usage limits can make a calendar read-only for hours: don't hot-loop.
    Row(
        "403 calendar usage limits",
        RateLimited,
        (HttpError,),
        {403},
        ("quotaExceeded", "dailyLimitExceeded"),
        retry_after=QUOTA_RETRY_AFTER,
    ),
    Row(
        "403 permission denied",
        Forbidden,
        (HttpError,),
        {403},
        ("forbidden*", "insufficientPermissions", "accessNotConfigured", "notACalendarUser", "PERMISSION_DENIED"),
    ),
    # AuthorizedHttp already refreshed the token twice before letting a 401 through.
    Row("401 after refresh", AuthRevoked, (HttpError,), {401}),
    Row("400 bad request", InvalidRequest, (HttpError,), {400}),
    Row("404/410 calendar or event gone", EntityNotFound, (HttpError,), {404, 410}),
    Row("5xx server error", ProviderUnavailable, (HttpError,), range(500, 600)),
    Row(
        "token grant refused",
        AuthRevoked,
        (RefreshError,),
        codes=("invalid_grant", "invalid_client", "unauthorized_client", "invalid_scope", "access_denied"),
    ),
    Row("token endpoint failure", ProviderUnavailable, (RefreshError, TransportError)),
    Row("timeout", ProviderTimeout, (TimeoutError,)),
    Row(
        "connection failure",
        ProviderUnavailable,
        (OSError, http.client.HTTPException, httplib2.HttpLib2Error),
    ),
    Row("anything else", ProviderUnavailable, (Exception,)),
)


def describe(exc: BaseException) -> Failure:
    """Read status, reasons and message from the body ourselves: ``HttpError.reason`` is prose."""
    if isinstance(exc, HttpError):
        status = int(exc.resp.status)
        codes: set[str] = set()
        message = str(getattr(exc.resp, "reason", "") or "")
        try:
            error = json.loads(exc.content).get("error")
        except (ValueError, TypeError, AttributeError):
            error = None
        if isinstance(error, dict):
            items = [*(error.get("errors") or []), *(error.get("details") or [])]
            codes.update(str(item["reason"]) for item in items if isinstance(item, dict) and item.get("reason"))
            if error.get("status"):
                codes.add(str(error["status"]))
            message = str(error.get("message") or message)
        return Failure(exc, status, frozenset(codes), message, parse_retry_after(exc.resp.get("retry-after")))
    if isinstance(exc, RefreshError):
        payload = exc.args[1] if len(exc.args) > 1 and isinstance(exc.args[1], dict) else {}
        code = payload.get("error")
        text = str(exc.args[0]) if exc.args else ""
        return Failure(exc, None, frozenset({code} if isinstance(code, str) else ()), text, None)
    return Failure(exc, None, frozenset(), f"{type(exc).__name__}: {exc}", None)


def classify(exc: BaseException, operation: str, secrets: Collection[str] = ()) -> CalsyncError:
    """Turn a library failure into the calsync error the pipeline retries or dead-letters, with a scrubbed message."""
    failure = describe(exc)
    row = next(row for row in CLASSIFICATION if row.matches(failure))
    status = f"HTTP {failure.status} " if failure.status is not None else ""
    codes = ",".join(sorted(failure.codes))
    detail = f"{status}{codes + ': ' if codes else ''}{failure.message}"
    message = redact(f"Google {operation} failed ({row.name}): {detail}", secrets)
    if len(message) > _MESSAGE_LIMIT:
        message = message[: _MESSAGE_LIMIT - 1] + "…"
    if issubclass(row.error, TemporaryError):
        hints = [h for h in (failure.retry_after, row.retry_after) if h is not None]
        return row.error(message, retry_after=max(hints) if hints else None)
    return row.error(message)

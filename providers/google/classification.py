"""The one table of Google failures: which are temporary, which permanent, and the calsync error each becomes."""

from __future__ import annotations

import http.client
import json
from collections.abc import Collection

import httplib2
from google.auth.exceptions import RefreshError, TransportError
from googleapiclient.errors import HttpError

from calsync.core.model.classification import Failure, Row, classify_failure
from calsync.core.model.errors import (
    AuthRevoked,
    CalsyncError,
    EntityNotFound,
    Forbidden,
    FullSyncRequired,
    InvalidRequest,
    ProviderThrottled,
    ProviderTimeout,
    ProviderUnavailable,
    RateLimited,
)
from calsync.core.model.retry_after import parse_retry_after

QUOTA_RETRY_AFTER = 3600.0


def _reason(name: str, error: type[CalsyncError], *codes: str, retry_after: float | None = None) -> Row:
    """A row keyed by Google's reason (any HTTP status): the reason is what Google documents per error."""
    return Row(name, error, (HttpError,), None, (name, *codes), retry_after)


#: First matching row wins. Reason rows come before the status rows that catch what they leave
#: (docs/notes/google-calendar.md, "Errors").
CLASSIFICATION: tuple[Row, ...] = (
    # The project's quota (every user of the app), told apart only by Cloud's message naming the consumer project:
    # every account waits, not just this one.
    Row("per-project quota", ProviderThrottled, (HttpError,), {403, 429}, text="for consumer 'project_number:"),
    Row("429 too many requests", RateLimited, (HttpError,), {429}),
    _reason("rateLimitExceeded", RateLimited, "RATE_LIMIT_EXCEEDED"),
    _reason("userRateLimitExceeded", RateLimited, "USER_RATE_LIMIT_EXCEEDED"),
    # Calendar usage limits can make a calendar read-only for hours: don't hot-loop.
    _reason("quotaExceeded", RateLimited, "dailyLimitExceeded", retry_after=QUOTA_RETRY_AFTER),
    _reason("requiredAccessLevel", Forbidden),
    _reason("forbiddenForNonOrganizer", Forbidden),
    _reason("forbiddenForServiceAccounts", Forbidden),
    _reason("insufficientPermissions", Forbidden, "ACCESS_TOKEN_SCOPE_INSUFFICIENT"),
    _reason("notACalendarUser", Forbidden),
    _reason("cannotChangeOrganizer", Forbidden),
    # The only retryable 403s are the rate limits above; a 403 without a known reason (e.g. a bare
    # "insufficient authentication scopes") is a refusal too.
    Row("403 any other reason", Forbidden, (HttpError,), {403}),
    # AuthorizedHttp already refreshed the token twice before letting a 401 through.
    Row("401 after refresh", AuthRevoked, (HttpError,), {401}),
    _reason("timeRangeEmpty", InvalidRequest),
    _reason("required", InvalidRequest),
    _reason("invalid", InvalidRequest),
    Row("400 any other reason", InvalidRequest, (HttpError,), {400}),
    # 410 means two different things: an event that is gone (a delete's success), or a list's sync token
    # (or updatedMin) that is no longer honoured.
    _reason("deleted", EntityNotFound),
    _reason("fullSyncRequired", FullSyncRequired, "updatedMinTooLongAgo"),
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


def _reasons(items: object) -> set[str]:
    if not isinstance(items, list):
        return set()
    return {str(item["reason"]) for item in items if isinstance(item, dict) and item.get("reason")}


def describe(exc: BaseException) -> Failure:
    """Read status, reasons and message from the body ourselves: ``HttpError.reason`` is prose.

    ``codes`` are ``errors[].reason`` when the body has any, else the ErrorInfo ``details[].reason`` (a body
    may carry only those), else the OAuth ``error`` of a token-endpoint refusal. ``error.status``
    (``PERMISSION_DENIED``, ...) is never read: Google's documented bodies do not carry it.
    """
    if isinstance(exc, HttpError):
        status = int(exc.resp.status)
        codes: set[str] = set()
        message = str(getattr(exc.resp, "reason", "") or "")
        try:
            error = json.loads(exc.content).get("error")
        except (ValueError, TypeError, AttributeError):
            error = None
        if isinstance(error, dict):
            codes = _reasons(error.get("errors")) or _reasons(error.get("details"))
            message = str(error.get("message") or message)
        return Failure(exc, status, frozenset(codes), message, parse_retry_after(exc.resp.get("retry-after")))
    if isinstance(exc, RefreshError):
        payload = exc.args[1] if len(exc.args) > 1 and isinstance(exc.args[1], dict) else {}
        code = payload.get("error")
        text = str(exc.args[0]) if exc.args else ""
        if isinstance(code, str):  # google-auth writes "code: description"; the code is already in codes
            text = text.removeprefix(f"{code}: ")
        return Failure(exc, None, frozenset({code} if isinstance(code, str) else ()), text, None)
    return Failure(exc, None, frozenset(), f"{type(exc).__name__}: {exc}", None)


def classify(exc: BaseException, operation: str, secrets: Collection[str] = ()) -> CalsyncError:
    """Turn a library failure into the calsync error the pipeline retries or dead-letters, with a scrubbed message."""
    return classify_failure(CLASSIFICATION, describe(exc), f"Google {operation}", secrets)

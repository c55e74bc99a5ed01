"""The one table of Microsoft Graph and Entra failures: what is temporary, what permanent, the error each becomes.

Sources per row: docs/notes/exchange.md ("Graph"). Rows are tried in order; the first match wins.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import httpx

from calsync.core.model.classification import Failure, Row, classify_failure
from calsync.core.model.errors import (
    AppCredentialsRejected,
    AuthRevoked,
    CalsyncError,
    ConcurrencyLimited,
    EntityNotFound,
    Forbidden,
    InvalidRequest,
    ProviderTimeout,
    ProviderUnavailable,
    QuotaExceeded,
    RateLimited,
    TemporaryError,
)
from calsync.core.model.retry_after import parse_retry_after


class GraphHttpError(Exception):
    """A non-2xx answer of the Graph API, reduced to what the flows and the table read."""

    def __init__(self, status: int, code: str, message: str, headers: Mapping[str, str], inner: str = "") -> None:
        super().__init__(f"HTTP {status} {code}: {message}")
        self.status = status
        self.code = code
        self.inner = inner
        self.message = message
        self.retry_after = parse_retry_after(headers.get("retry-after"))

    @classmethod
    def of(cls, response: httpx.Response) -> GraphHttpError:
        """Read Graph's ``{"error": {"code", "message", "innerError"}}`` body; works on status alone without it."""
        code = inner = message = ""
        try:
            error = response.json().get("error")
        except (ValueError, AttributeError):
            error = None
        if isinstance(error, dict):
            code, message = str(error.get("code") or ""), str(error.get("message") or "")
            inner_error = error.get("innerError") or error.get("innererror")
            if isinstance(inner_error, dict):
                inner = str(inner_error.get("code") or "")
        return cls(response.status_code, code, message or response.reason_phrase, response.headers, inner)


class TokenError(Exception):
    """Entra refused a token request (msal's result dict: ``error``, ``error_description``, ``error_codes``)."""

    def __init__(self, result: Mapping[str, Any]) -> None:
        self.error = str(result.get("error") or "")
        self.description = str(result.get("error_description") or "").split("\r\n", 1)[0]
        self.codes = frozenset(f"AADSTS{c}" for c in result.get("error_codes") or ())
        super().__init__(f"{self.error}: {self.description}")


class AccessPolicyDenied(Forbidden, reason="blocked by application access policy"):
    """The mailbox is outside the app's application access policy (or RBAC for Applications scope)."""


class MailboxNotEnabled(EntityNotFound, reason="mailbox not enabled for REST"):
    """No Exchange Online mailbox behind the address (unlicensed, on-premises, or a shared resource without REST)."""


_API = (GraphHttpError,)
_TOKEN = (TokenError,)

CLASSIFICATION: tuple[Row, ...] = (
    Row("mailbox concurrency (4 in flight)", ConcurrencyLimited, _API, {429, 503}, ("ApplicationThrottled",),
        text="MailboxConcurrency"),
    Row("429 throttled", RateLimited, _API, {429}),
    Row("503/504 unavailable", ProviderUnavailable, _API, {503, 504}),
    Row("refresh token expired, revoked or blocked by sign-in frequency", AuthRevoked, _TOKEN,
        codes=("AADSTS700082", "AADSTS50173", "AADSTS70043")),
    Row("app secret wrong or expired, or app unknown", AppCredentialsRejected, _TOKEN,
        codes=("AADSTS7000215", "AADSTS7000222", "AADSTS700016")),
    Row("grant refused", AuthRevoked, _TOKEN, codes=("invalid_grant", "interaction_required")),
    Row("client refused", AppCredentialsRejected, _TOKEN, codes=("invalid_client", "unauthorized_client")),
    Row("token endpoint failure", ProviderUnavailable, _TOKEN),
    Row("401 after one refresh", AuthRevoked, _API, {401}),
    Row("403 application access policy", AccessPolicyDenied, _API, {403}, text="Access to OData is disabled"),
    Row("mailbox not enabled for REST", MailboxNotEnabled, _API, codes=("MailboxNotEnabledForRESTAPI",)),
    Row("403 access denied", Forbidden, _API, {403}),
    Row("mailbox quota exceeded", QuotaExceeded, _API, codes=("ErrorQuotaExceeded",)),
    Row("400 bad request", InvalidRequest, _API, {400}),
    Row("404 mailbox or calendar not found", EntityNotFound, _API, {404}),
    Row("409/412 conflict persisted", TemporaryError, _API, {409, 412}),
    Row("5xx server error", ProviderUnavailable, _API, range(500, 600)),
    Row("timeout", ProviderTimeout, (httpx.TimeoutException, TimeoutError)),
    Row("connection failure", ProviderUnavailable, (httpx.TransportError, OSError)),
    Row("anything else", TemporaryError, (Exception,)),
)  # fmt: skip


def describe(exc: BaseException) -> Failure:
    """The primitives of a failure, read from our two exception types (anything else: its type only)."""
    if isinstance(exc, GraphHttpError):
        codes = frozenset(c for c in (exc.code, exc.inner) if c)
        return Failure(exc, exc.status, codes, exc.message, exc.retry_after)
    if isinstance(exc, TokenError):
        # Entra starts its description with the AADSTS code, which codes already carries
        description = next((exc.description.removeprefix(f"{c}: ") for c in exc.codes
                            if exc.description.startswith(f"{c}: ")), exc.description)  # fmt: skip
        return Failure(exc, None, exc.codes | ({exc.error} if exc.error else set()), description, None)
    return Failure(exc, None, frozenset(), f"{type(exc).__name__}: {exc}", None)


def classify(exc: BaseException, operation: str, mailbox: str, secrets: Iterable[str] = ()) -> CalsyncError:
    """Turn a Graph/Entra/httpx failure into the calsync error the pipeline defers, retries or dead-letters."""
    return classify_failure(CLASSIFICATION, describe(exc), f"Graph {operation} for {mailbox}", secrets)

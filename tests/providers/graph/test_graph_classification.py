"""Every row of the Graph classification table, and that no row is left untested."""

from __future__ import annotations

import httpx
import pytest

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
    is_permanent,
)
from calsync.providers.graph.classification import (
    CLASSIFICATION,
    AccessPolicyDenied,
    GraphHttpError,
    MailboxNotEnabled,
    TokenError,
    classify,
    describe,
)


def api(
    status: int, code: str = "", message: str = "", retry_after: str | None = None, inner: str = ""
) -> GraphHttpError:
    """A Graph API failure as the adapter builds it from a response."""
    return GraphHttpError(status, code, message, {"retry-after": retry_after} if retry_after else {}, inner)


def token(error: str, *codes: int) -> TokenError:
    """An Entra refusal as msal reports it."""
    return TokenError({"error": error, "error_description": f"AADSTS{codes[0] if codes else 0}: no",
                       "error_codes": list(codes)})  # fmt: skip


CASES: list[tuple[str, BaseException, type[CalsyncError]]] = [
    ("mailbox concurrency (4 in flight)",
     api(429, "ApplicationThrottled", "Application is over its MailboxConcurrency limit.", "1"), ConcurrencyLimited),
    ("429 throttled", api(429, "ApplicationThrottled", "Rate limit", "3"), RateLimited),
    ("503/504 unavailable", api(503, "ServiceUnavailable", retry_after="5"), ProviderUnavailable),
    ("503/504 unavailable", api(504, "GatewayTimeout"), ProviderUnavailable),
    ("refresh token expired, revoked or blocked by sign-in frequency", token("invalid_grant", 700082), AuthRevoked),
    ("refresh token expired, revoked or blocked by sign-in frequency", token("invalid_grant", 50173), AuthRevoked),
    ("refresh token expired, revoked or blocked by sign-in frequency", token("invalid_grant", 70043), AuthRevoked),
    ("app secret wrong or expired, or app unknown", token("invalid_client", 7000215), AppCredentialsRejected),
    ("app secret wrong or expired, or app unknown", token("invalid_client", 7000222), AppCredentialsRejected),
    ("app secret wrong or expired, or app unknown", token("unauthorized_client", 700016), AppCredentialsRejected),
    ("grant refused", token("invalid_grant", 9002313), AuthRevoked),
    ("client refused", token("invalid_client", 7000218), AppCredentialsRejected),
    ("token endpoint failure", token("temporarily_unavailable", 50196), ProviderUnavailable),
    ("401 after one refresh", api(401, "InvalidAuthenticationToken"), AuthRevoked),
    ("403 application access policy", api(403, "ErrorAccessDenied", "Access to OData is disabled."),
     AccessPolicyDenied),
    ("mailbox not enabled for REST", api(404, "MailboxNotEnabledForRESTAPI", "REST API is not yet supported"),
     MailboxNotEnabled),
    ("mailbox not enabled for REST", api(403, "ErrorAccessDenied", "x", inner="MailboxNotEnabledForRESTAPI"),
     MailboxNotEnabled),
    ("403 access denied", api(403, "ErrorAccessDenied", "Access is denied."), Forbidden),
    ("mailbox quota exceeded", api(507, "ErrorQuotaExceeded", "The mailbox is full."), QuotaExceeded),
    ("400 bad request", api(400, "ErrorInvalidRequest"), InvalidRequest),
    ("404 mailbox or calendar not found", api(404, "ErrorInvalidUser"), EntityNotFound),
    ("409/412 conflict persisted", api(412, "ErrorIrresolvableConflict"), TemporaryError),
    ("5xx server error", api(500, ""), ProviderUnavailable),
    ("timeout", httpx.ReadTimeout("timed out"), ProviderTimeout),
    ("connection failure", httpx.ConnectError("refused"), ProviderUnavailable),
    ("anything else", ValueError("surprise"), TemporaryError),
    ("anything else", api(418, "Teapot"), TemporaryError),
]  # fmt: skip


@pytest.mark.parametrize(("row", "failure", "error"), CASES, ids=[f"{c[0]}:{type(c[1]).__name__}" for c in CASES])
def test_each_row(row: str, failure: BaseException, error: type[CalsyncError]) -> None:
    matched = next(r for r in CLASSIFICATION if r.matches(describe(failure)))
    assert matched.name == row
    result = classify(failure, "upsert", "alpha@example.com")
    assert type(result) is error
    assert row in str(result)


def test_every_row_is_tested() -> None:
    assert {r.name for r in CLASSIFICATION} == {c[0] for c in CASES}


def test_retry_after_is_carried_as_the_floor_for_429_503_and_mailbox_concurrency() -> None:
    assert classify(api(429, "x", retry_after="3"), "op", "m").retry_after == 3  # type: ignore[attr-defined]
    assert classify(api(503, "x", retry_after="5"), "op", "m").retry_after == 5  # type: ignore[attr-defined]
    limited = classify(CASES[0][1], "op", "m")
    assert isinstance(limited, ConcurrencyLimited) and limited.retry_after == 1


def test_permanence_follows_the_issue() -> None:
    permanent = {AuthRevoked, AppCredentialsRejected, AccessPolicyDenied, MailboxNotEnabled, Forbidden,
                 QuotaExceeded, InvalidRequest, EntityNotFound}  # fmt: skip
    for _, failure, error in CASES:
        assert is_permanent(classify(failure, "op", "m")) == (error in permanent), error


def test_an_error_body_without_graph_shape_classifies_on_status_alone() -> None:
    response = httpx.Response(502, text="<html>Bad gateway</html>", request=httpx.Request("GET", "https://x"))
    assert isinstance(classify(GraphHttpError.of(response), "op", "m"), ProviderUnavailable)


def test_a_token_refusal_names_its_codes_once() -> None:
    message = str(classify(token("invalid_grant", 50173), "upsert", "a@b.c"))
    assert message.endswith("AADSTS50173,invalid_grant: no") and message.count("AADSTS50173") == 1

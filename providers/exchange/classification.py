"""The one table from exchangelib/EWS/OAuth failures to calsync errors, and the classifier that reads it."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable
from dataclasses import dataclass

from exchangelib.errors import MalformedResponseError, TransportError

from calsync.core.model.errors import (
    AuthRevoked,
    CalsyncError,
    ConfigurationError,
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


@dataclass(frozen=True)
class Classification:
    """One row: an exchangelib/EWS error name, ``HTTP nnn`` or ``Prefix*``, and what it means for the job."""

    match: str
    error: type[CalsyncError]
    meaning: str

    def matches(self, name: str) -> bool:
        """Exact name, or prefix when the pattern ends with ``*``."""
        return fnmatch.fnmatchcase(name, self.match)


# Names are tried most specific first (see _error_names): a status parsed from MalformedResponseError,
# the original class of an "Reraised from X(...)" wrapper, the class itself, then its ancestors. Every
# EWS error subclasses TransportError, so no row may name TransportError; unmatched errors are retried.
CLASSIFICATION: tuple[Classification, ...] = (
    # Throttling: the server tells us when to come back (ErrorServerBusy carries BackOffMilliseconds).
    Classification("ErrorServerBusy", RateLimited, "server busy (EWS throttling)"),
    Classification("ErrorTooManyObjectsOpened", RateLimited, "too many objects opened (throttling)"),
    Classification("ErrorExceededConnectionCount", RateLimited, "too many concurrent connections"),
    Classification("HTTP 429", RateLimited, "too many requests (HTTP 429)"),
    # Our own deadline.
    Classification("ReadTimeout", ProviderTimeout, "no answer within PROVIDER_TIMEOUT"),
    # Infrastructure hiccups, failovers, mailbox moves. Network failures arrive as ErrorTimeoutExpired.
    Classification("ErrorTimeoutExpired", ProviderUnavailable, "connection failed or timed out"),
    Classification("ConnectionError", ProviderUnavailable, "connection refused or reset"),
    Classification("ErrorInternalServerTransientError", ProviderUnavailable, "transient server error"),
    Classification("ErrorInternalServerError", ProviderUnavailable, "internal server error"),
    Classification("ErrorMailboxStoreUnavailable", ProviderUnavailable, "mailbox store unavailable"),
    Classification("ErrorConnectionFailed", ProviderUnavailable, "server-side connection failed"),
    Classification("ErrorConnectionFailedTransientError", ProviderUnavailable, "server-side connection failed"),
    Classification("ErrorMailboxMoveInProgress", ProviderUnavailable, "mailbox move in progress"),
    Classification("ErrorADUnavailable", ProviderUnavailable, "directory unavailable"),
    Classification("HTTP 500", ProviderUnavailable, "server error (HTTP 500)"),
    Classification("HTTP 502", ProviderUnavailable, "bad gateway (HTTP 502)"),
    Classification("HTTP 504", ProviderUnavailable, "gateway timeout (HTTP 504)"),
    Classification("OAuth2Error", ProviderUnavailable, "token endpoint failed"),
    # Someone kept editing the item while we re-resolved and re-applied once.
    Classification("ErrorIrresolvableConflict", TemporaryError, "change key conflict persisted"),
    Classification("ErrorInvalidChangeKey", TemporaryError, "change key conflict persisted"),
    Classification("ErrorStaleObject", TemporaryError, "change key conflict persisted"),
    # Credentials: never retried, repeating a wrong password can lock the account out.
    Classification("UnauthorizedError", AuthRevoked, "credentials rejected"),
    Classification("InvalidClientError", AuthRevoked, "client id or secret rejected by the token endpoint"),
    Classification("UnauthorizedClientError", AuthRevoked, "application not authorized by the token endpoint"),
    Classification("InvalidGrantError", AuthRevoked, "grant rejected by the token endpoint"),
    # Permissions and policy.
    Classification("ErrorAccessDenied", Forbidden, "access denied"),
    Classification("ErrorImpersonateUserDenied", Forbidden, "impersonation not granted to this login"),
    Classification("ErrorImpersonationFailed", Forbidden, "impersonation failed"),
    Classification("HTTP 403", Forbidden, "EWS blocked for this mailbox or tenant (HTTP 403)"),
    Classification("ErrorQuotaExceeded", Forbidden, "mailbox quota exceeded"),
    # Things that do not exist.
    Classification("ErrorNonExistentMailbox", EntityNotFound, "mailbox does not exist"),
    Classification("ErrorFolderNotFound", EntityNotFound, "calendar folder not found"),
    Classification("ErrorItemNotFound", EntityNotFound, "item not found"),
    # Configuration.
    Classification("HTTP 404", ConfigurationError, "no EWS endpoint at server_url (HTTP 404)"),
    Classification("RedirectError", ConfigurationError, "server_url redirects; configure the final URL"),
    Classification("SSLError", ConfigurationError, "TLS handshake with server_url failed"),
    Classification("InsecureTransportError", ConfigurationError, "OAuth2 needs https for server_url and token_url"),
    Classification("InvalidScopeError", ConfigurationError, "token endpoint rejected the EWS scope"),
    Classification(
        "ErrorInvalidExchangeImpersonationHeaderData", ConfigurationError, "app-only tokens need impersonation"
    ),
    Classification(
        "ErrorInvalidSchemaVersionForMailboxVersion", ConfigurationError, "server does not speak the 2016 API"
    ),
    # The request itself is wrong.
    Classification("ErrorCalendar*", InvalidRequest, "calendar validation failed"),
    Classification("ErrorSchemaValidation", InvalidRequest, "request failed schema validation"),
    Classification("ErrorInvalidExtendedProperty*", InvalidRequest, "extended property rejected"),
    Classification("ErrorInvalidPropertyRequest", InvalidRequest, "property rejected"),
    Classification("ErrorInvalidIdMalformed", InvalidRequest, "malformed item id"),
)

_HTTP_STATUS = re.compile(r"Code: (\d{3})")
_RERAISED = re.compile(r"^Reraised from (\w+)\(")
_RETRY_AFTER = re.compile(r"'retry-after': '([^']*)'", re.IGNORECASE)
_DETAIL_LIMIT = 240


def _error_names(exc: BaseException) -> list[str]:
    names = []
    text = str(exc)
    if isinstance(exc, MalformedResponseError) and (status := _HTTP_STATUS.search(text)):
        names.append(f"HTTP {status.group(1)}")
    if reraised := _RERAISED.match(text):
        names.append(reraised.group(1))
    names.append(type(exc).__name__)
    # exchangelib turns TLS failures into a bare TransportError raised while handling the SSLError.
    if type(exc) is TransportError and exc.__context__ is not None:
        names.append(type(exc.__context__).__name__)
    names += [k.__name__ for k in type(exc).__mro__[1:] if k not in (BaseException, Exception, object)]
    return names


def classify_error(exc: BaseException, *, operation: str, mailbox: str, secrets: Iterable[str] = ()) -> CalsyncError:
    """Turn an exchangelib/EWS/OAuth failure into the calsync error the retry policy acts on."""
    names = _error_names(exc)
    found = next(((name, row) for name in names for row in CLASSIFICATION if row.matches(name)), None)
    detail = " ".join(redact(str(exc), secrets).split())[:_DETAIL_LIMIT]
    if found is None:
        return TemporaryError(f"Exchange {operation} for {mailbox}: unclassified {type(exc).__name__}: {detail}")
    name, row = found
    message = f"Exchange {operation} for {mailbox}: {row.meaning} [{name}]: {detail}"
    if row.error is RateLimited:
        return RateLimited(message, retry_after=_retry_after(exc))
    return row.error(message)


def _retry_after(exc: BaseException) -> float | None:
    back_off = getattr(exc, "back_off", None)  # ErrorServerBusy: BackOffMilliseconds, in seconds
    if back_off:
        return parse_retry_after(float(back_off))
    header = _RETRY_AFTER.search(str(exc))  # a 429 only shows its Retry-After inside the message
    return parse_retry_after(header.group(1)) if header else None

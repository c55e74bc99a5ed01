"""The one table from exchangelib/EWS/OAuth failures to calsync errors, and the classifier that reads it."""

from __future__ import annotations

import re
from collections.abc import Iterable
from fnmatch import fnmatchcase

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

CLASSIFICATION: dict[str, tuple[type[CalsyncError], str]] = {
    # Throttling: the server tells us when to come back (ErrorServerBusy carries BackOffMilliseconds).
    "ErrorServerBusy": (RateLimited, "server busy (EWS throttling)"),
    "ErrorTooManyObjectsOpened": (RateLimited, "too many objects opened (throttling)"),
    "ErrorExceededConnectionCount": (RateLimited, "too many concurrent connections"),
    "HTTP 429": (RateLimited, "too many requests (HTTP 429)"),
    # Our own deadline.
    "ReadTimeout": (ProviderTimeout, "no answer within PROVIDER_TIMEOUT"),
    # Infrastructure hiccups, failovers, mailbox moves. Network failures arrive as ErrorTimeoutExpired.
    "ErrorTimeoutExpired": (ProviderUnavailable, "connection failed or timed out"),
    "ConnectionError": (ProviderUnavailable, "connection refused or reset"),
    "ErrorInternalServerTransientError": (ProviderUnavailable, "transient server error"),
    "ErrorInternalServerError": (ProviderUnavailable, "internal server error"),
    "ErrorMailboxStoreUnavailable": (ProviderUnavailable, "mailbox store unavailable"),
    "ErrorConnectionFailed": (ProviderUnavailable, "server-side connection failed"),
    "ErrorConnectionFailedTransientError": (ProviderUnavailable, "server-side connection failed"),
    "ErrorMailboxMoveInProgress": (ProviderUnavailable, "mailbox move in progress"),
    "ErrorADUnavailable": (ProviderUnavailable, "directory unavailable"),
    "HTTP 500": (ProviderUnavailable, "server error (HTTP 500)"),
    "HTTP 502": (ProviderUnavailable, "bad gateway (HTTP 502)"),
    "HTTP 504": (ProviderUnavailable, "gateway timeout (HTTP 504)"),
    "OAuth2Error": (ProviderUnavailable, "token endpoint failed"),
    # Someone kept editing the item while we re-resolved and re-applied once.
    "ErrorIrresolvableConflict": (TemporaryError, "change key conflict persisted"),
    "ErrorInvalidChangeKey": (TemporaryError, "change key conflict persisted"),
    "ErrorStaleObject": (TemporaryError, "change key conflict persisted"),
    # Credentials: never retried, repeating a wrong password can lock the account out.
    "UnauthorizedError": (AuthRevoked, "credentials rejected"),
    "InvalidClientError": (AuthRevoked, "client id or secret rejected by the token endpoint"),
    "UnauthorizedClientError": (AuthRevoked, "application not authorized by the token endpoint"),
    "InvalidGrantError": (AuthRevoked, "grant rejected by the token endpoint"),
    # Permissions and policy.
    "ErrorAccessDenied": (Forbidden, "access denied"),
    "ErrorImpersonateUserDenied": (Forbidden, "impersonation not granted to this login"),
    "ErrorImpersonationFailed": (Forbidden, "impersonation failed"),
    "HTTP 403": (Forbidden, "EWS blocked for this mailbox or tenant (HTTP 403)"),
    "ErrorQuotaExceeded": (Forbidden, "mailbox quota exceeded"),
    # Things that do not exist.
    "ErrorNonExistentMailbox": (EntityNotFound, "mailbox does not exist"),
    "ErrorFolderNotFound": (EntityNotFound, "calendar folder not found"),
    "ErrorItemNotFound": (EntityNotFound, "item not found"),
    # Configuration.
    "HTTP 404": (ConfigurationError, "no EWS endpoint at server_url (HTTP 404)"),
    "RedirectError": (ConfigurationError, "server_url redirects; configure the final URL"),
    "SSLError": (ConfigurationError, "TLS handshake with server_url failed"),
    "InsecureTransportError": (ConfigurationError, "OAuth2 needs https for server_url and token_url"),
    "InvalidScopeError": (ConfigurationError, "token endpoint rejected the EWS scope"),
    "ErrorInvalidExchangeImpersonationHeaderData": (ConfigurationError, "app-only tokens need impersonation"),
    "ErrorInvalidSchemaVersionForMailboxVersion": (ConfigurationError, "server does not speak the 2016 API"),
    # The request itself is wrong.
    "ErrorCalendar*": (InvalidRequest, "calendar validation failed"),
    "ErrorSchemaValidation": (InvalidRequest, "request failed schema validation"),
    "ErrorInvalidExtendedProperty*": (InvalidRequest, "extended property rejected"),
    "ErrorInvalidPropertyRequest": (InvalidRequest, "property rejected"),
    "ErrorInvalidIdMalformed": (InvalidRequest, "malformed item id"),
}

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
    found = next(((name, pattern) for name in names for pattern in CLASSIFICATION if fnmatchcase(name, pattern)), None)
    detail = " ".join(redact(str(exc), secrets).split())[:_DETAIL_LIMIT]
    if found is None:
        return TemporaryError(f"Exchange {operation} for {mailbox}: unclassified {type(exc).__name__}: {detail}")
    name, pattern = found
    error, meaning = CLASSIFICATION[pattern]
    message = f"Exchange {operation} for {mailbox}: {meaning} [{name}]: {detail}"
    if error is not RateLimited:
        return error(message)
    back_off = getattr(exc, "back_off", None)  # ErrorServerBusy: BackOffMilliseconds, in seconds
    header = _RETRY_AFTER.search(str(exc))  # a 429 only shows its Retry-After inside the message
    hint = float(back_off) if back_off else header[1] if header else None
    return RateLimited(message, retry_after=parse_retry_after(hint))

"""The one table from exchangelib/EWS/OAuth failures to calsync errors, on the shared table of every adapter.

A failure's codes are every name it goes by: the exception exchangelib re-raised it from (``Reraised from X(``),
its type, the TLS error behind a bare ``TransportError``, and its base classes (``OAuth2Error``, ``ConnectionError``).
Rows are tried in order, so the row of what exchangelib re-raises (connection errors as ErrorTimeoutExpired, those and
ErrorTooManyObjectsOpened and ErrorInternalServerTransientError as ErrorServerBusy) comes before its wrapper's row.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable

from exchangelib.errors import EWSError, MalformedResponseError, ResponseMessageError, TransportError

from calsync.core.model.classification import Failure, Row, classify_failure
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
from calsync.core.model.retry_after import parse_retry_after

_ANY = (Exception,)


class _Prefixes(Row):
    """A row for families of EWS response codes (``ErrorCalendar...``): any code starting with one of its codes."""

    def matches(self, failure: Failure) -> bool:
        return isinstance(failure.exc, self.kinds) and any(code.startswith(self.codes) for code in failure.codes)


def _codes(name: str, error: type[CalsyncError], *codes: str) -> Row:
    return Row(name, error, _ANY, codes=codes)


_ROWS: tuple[Row, ...] = (
    _codes("no answer within PROVIDER_TIMEOUT", ProviderTimeout, "ReadTimeout"),
    # Never retried: server_url, TLS or the OAuth2 setup has to change first. Before ConnectionError and
    # OAuth2Error, whose subclasses SSLError, InsecureTransportError and InvalidScopeError are.
    _codes("server_url redirects; configure the final URL", ConfigurationError, "RedirectError"),
    _codes("TLS handshake with server_url failed", ConfigurationError, "SSLError"),
    _codes("OAuth2 needs https for server_url and token_url", ConfigurationError, "InsecureTransportError"),
    _codes("token endpoint rejected the EWS scope", ConfigurationError, "InvalidScopeError"),
    _codes("app-only tokens need impersonation", ConfigurationError, "ErrorInvalidExchangeImpersonationHeaderData"),
    _codes("server does not speak the 2016 API", ConfigurationError, "ErrorInvalidSchemaVersionForMailboxVersion"),
    Row("no EWS endpoint at server_url (HTTP 404)", ConfigurationError, _ANY, {404}),
    # Throttling: the server tells us when to come back (ErrorServerBusy carries BackOffMilliseconds). What
    # exchangelib re-raises as ErrorServerBusy stays what it was, so ErrorServerBusy's row comes after the others.
    _codes("too many objects opened or connections", RateLimited, "ErrorTooManyObjectsOpened",
           "ErrorExceededConnectionCount"),
    # Infrastructure hiccups, failovers, mailbox moves. Network failures arrive as ErrorTimeoutExpired.
    _codes("connection refused or reset", ProviderUnavailable, "ConnectionError"),
    _codes("connection failed or timed out", ProviderUnavailable, "ErrorTimeoutExpired"),
    _codes("server, mailbox store or directory unavailable", ProviderUnavailable, "ErrorInternalServerTransientError",
           "ErrorInternalServerError", "ErrorMailboxStoreUnavailable", "ErrorConnectionFailed",
           "ErrorConnectionFailedTransientError", "ErrorMailboxMoveInProgress", "ErrorADUnavailable"),
    Row("5xx server error", ProviderUnavailable, _ANY, {500, 502, 504}),
    _codes("server busy (EWS throttling)", RateLimited, "ErrorServerBusy"),
    Row("429 too many requests", RateLimited, _ANY, {429}),
    # Someone kept editing the item while we re-resolved and re-applied once.
    _codes("change key conflict persisted", TemporaryError, "ErrorIrresolvableConflict", "ErrorInvalidChangeKey",
           "ErrorStaleObject"),
    # Never retried: repeating a wrong password can lock the account out.
    _codes("credentials rejected", AuthRevoked, "UnauthorizedError", "InvalidClientError", "UnauthorizedClientError",
           "InvalidGrantError"),
    _codes("token endpoint failed", ProviderUnavailable, "OAuth2Error"),
    _codes("access denied", Forbidden, "ErrorAccessDenied", "ErrorImpersonateUserDenied", "ErrorImpersonationFailed",
           "ErrorQuotaExceeded"),
    Row("EWS blocked for this mailbox or tenant (HTTP 403)", Forbidden, _ANY, {403}),
    _codes("mailbox, calendar folder or item not found", EntityNotFound, "ErrorNonExistentMailbox",
           "ErrorFolderNotFound", "ErrorItemNotFound"),
    # The request itself is wrong.
    _Prefixes("calendar or extended property rejected", InvalidRequest, _ANY,
              codes=("ErrorCalendar", "ErrorInvalidExtendedProperty")),
    _codes("request rejected", InvalidRequest, "ErrorSchemaValidation", "ErrorInvalidPropertyRequest",
           "ErrorInvalidIdMalformed"),
    Row("anything else", TemporaryError, _ANY),
)  # fmt: skip
# Only throttling keeps the back-off: on a failure exchangelib re-raised as ErrorServerBusy (a 503, a lost connection)
# it is exchangelib's own doubling retry delay, which would block the account for nothing.
CLASSIFICATION = tuple(dataclasses.replace(row, provider_hint=issubclass(row.error, RateLimited)) for row in _ROWS)

# Bases every EWS error shares: they tell nothing apart, so they stay out of the codes a message lists.
_BASES = (BaseException, Exception, object, EWSError, TransportError, ResponseMessageError)
_HTTP_STATUS = re.compile(r"Code: (\d{3})")
_RERAISED = re.compile(r"^Reraised from (\w+)\(")
_RETRY_AFTER = re.compile(r"'retry-after': '([^']*)'", re.IGNORECASE)


def describe(exc: BaseException) -> Failure:
    """The HTTP status exchangelib only writes into a MalformedResponseError's text, the names (see the module), and
    the back-off: ErrorServerBusy's BackOffMilliseconds, else the Retry-After a 429 shows only inside its message."""
    text = " ".join(str(exc).split())
    status = _HTTP_STATUS.search(text) if isinstance(exc, MalformedResponseError) else None
    names = {type(exc).__name__, *(k.__name__ for k in type(exc).__mro__[1:] if k not in _BASES)}
    if reraised := _RERAISED.match(text):
        names.add(reraised[1])
    # exchangelib turns TLS failures into a bare TransportError raised while handling the SSLError.
    if type(exc) is TransportError and exc.__context__ is not None:
        names.add(type(exc.__context__).__name__)
    header = _RETRY_AFTER.search(text)
    hint = getattr(exc, "back_off", None) or (header[1] if header else None)
    return Failure(exc, int(status[1]) if status else None, frozenset(names), text, parse_retry_after(hint))


def classify(exc: BaseException, operation: str, mailbox: str, secrets: Iterable[str] = ()) -> CalsyncError:
    """Turn an exchangelib/EWS/OAuth failure into the calsync error the retry policy acts on."""
    return classify_failure(CLASSIFICATION, describe(exc), f"Exchange {operation} for {mailbox}", secrets)

"""Google's error bodies: the Calendar v3 JSON shapes, the front end's HTML page and the OAuth endpoint's errors.

Styles (``ErrorStyle``):

- ``documented`` (the default): ``{"error": {"code", "message", "errors": [{"domain", "reason", "message",
  "locationType"?, "location"?}]}}``, exactly the shape of Google's "Handle API errors" page;
- ``status``: the same plus ``error.status`` (the google.rpc code, e.g. ``PERMISSION_DENIED``), which newer
  front ends add (observed in public reports, not on the errors page);
- ``details``: ``status`` plus ``details[]`` of ``google.rpc.ErrorInfo`` (which makes googleapiclient's
  ``HttpError.error_details`` return ``details`` instead of ``errors``);
- ``status_only``: ``code``, ``message`` and ``status`` without ``errors[]`` (reported for "insufficient
  authentication scopes");
- ``html``: a front-end error page.

The status defaults and reason texts are those Google documents for Calendar v3 (docs/notes/emulators.md
lists the sources); which reason a status defaults to when none is given, and the google.rpc status
per HTTP status, are our choice (inferred).
"""

from __future__ import annotations

import re
from http import HTTPStatus
from typing import Any, Literal

from calsync_emulators.server import Response

ErrorStyle = Literal["documented", "status", "details", "status_only", "html"]

# status -> (default reason, default message, google.rpc status); the texts are in docs/notes/emulators.md.
_STATUS_DEFAULTS: dict[int, tuple[str, str, str]] = {
    400: ("badRequest", "Bad Request", "INVALID_ARGUMENT"),
    401: ("authError", "Invalid Credentials", "UNAUTHENTICATED"),
    403: ("forbidden", "Forbidden", "PERMISSION_DENIED"),
    404: ("notFound", "Not Found", "NOT_FOUND"),
    409: ("duplicate", "The requested identifier already exists.", "ALREADY_EXISTS"),
    410: ("deleted", "Resource has been deleted", "NOT_FOUND"),
    412: ("conditionNotMet", "Precondition Failed", "FAILED_PRECONDITION"),
    429: ("rateLimitExceeded", "Rate Limit Exceeded", "RESOURCE_EXHAUSTED"),
    500: ("backendError", "Backend Error", "INTERNAL"),
    502: ("backendError", "Bad Gateway", "UNAVAILABLE"),
    503: ("backendError", "The service is currently unavailable.", "UNAVAILABLE"),
    504: ("backendError", "Deadline Exceeded", "DEADLINE_EXCEEDED"),
}
_REASON_MESSAGES = {
    "rateLimitExceeded": "Rate Limit Exceeded",
    "userRateLimitExceeded": "User Rate Limit Exceeded",
    "quotaExceeded": "Calendar usage limits exceeded.",
    "dailyLimitExceeded": "Daily Limit Exceeded",
    "forbiddenForNonOrganizer": "Shared properties can only be changed by the organizer of the event.",
    "forbiddenForServiceAccounts": "Service accounts cannot invite attendees without Domain-Wide Delegation of "
    "Authority.",
    "insufficientPermissions": "Insufficient Permission",
    "timeRangeEmpty": "The specified time range is empty.",
    "requiredAccessLevel": "You need to have writer access to this calendar.",
    "notACalendarUser": "The user must be signed up for Google Calendar.",
    "cannotChangeOrganizer": "Organizer of the event cannot be changed.",
    "fullSyncRequired": "Sync token is no longer valid, a full sync is required.",
    "updatedMinTooLongAgo": "The requested minimum modification time lies too far in the past.",
    "parseError": "Parse Error",
    "pushNotSupportedForRequestedResource": "Push notifications are not supported by this resource.",
}
_REASON_DOMAINS = {
    "rateLimitExceeded": "usageLimits",
    "userRateLimitExceeded": "usageLimits",
    "quotaExceeded": "usageLimits",
    "dailyLimitExceeded": "usageLimits",
    "forbiddenForNonOrganizer": "calendar",
    "forbiddenForServiceAccounts": "calendar",
    "timeRangeEmpty": "calendar",
    "requiredAccessLevel": "calendar",
    "notACalendarUser": "calendar",
    "cannotChangeOrganizer": "calendar",
    "fullSyncRequired": "calendar",
    "updatedMinTooLongAgo": "calendar",
    "pushNotSupportedForRequestedResource": "push",
}
# reason -> (locationType, location)
_REASON_LOCATIONS = {
    "authError": ("header", "Authorization"),
    "conditionNotMet": ("header", "If-Match"),
    "fullSyncRequired": ("parameter", "syncToken"),
    "updatedMinTooLongAgo": ("parameter", "updatedMin"),
}


class ApiError(Exception):
    """An API request Google would refuse; becomes an error response in Google's shape."""

    def __init__(
        self, status: int, reason: str | None = None, message: str | None = None, location: str | None = None
    ) -> None:
        super().__init__(message or reason or str(status))
        self.status = status
        self.reason = reason
        self.message = message
        self.location = location


class GrantError(Exception):
    """A token request the OAuth server would refuse."""

    def __init__(self, error: str, description: str) -> None:
        super().__init__(description)
        self.error = error
        self.description = description


def _upper_snake(reason: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", reason).upper()


def phrase(status: int) -> str:
    """The HTTP reason phrase of a status, as Google's front end prints it."""
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"


def google_error(
    status: int,
    reason: str | None = None,
    message: str | None = None,
    style: ErrorStyle = "documented",
    location: str | None = None,
) -> Response:
    """An error response exactly as Calendar v3 (or the front end in front of it) writes one."""
    default_reason, default_message, rpc_status = _STATUS_DEFAULTS.get(
        status, ("unknown" if status < 500 else "backendError", phrase(status), "UNKNOWN")
    )
    reason = reason or default_reason
    message = message or _REASON_MESSAGES.get(reason, default_message)
    if style == "html":
        page = f"<html><head><title>{status} {phrase(status)}</title></head><body>{message}</body></html>"
        return Response(status, page.encode(), {"Content-Type": "text/html; charset=UTF-8"})
    error: dict[str, Any] = {"code": status, "message": message}
    if style != "status_only":
        item = {"domain": _REASON_DOMAINS.get(reason, "global"), "reason": reason, "message": message}
        if location is not None:
            item.update(locationType="parameter", location=location)
        elif reason in _REASON_LOCATIONS:
            item.update(zip(("locationType", "location"), _REASON_LOCATIONS[reason], strict=True))
        error["errors"] = [item]
    if style != "documented":
        error["status"] = rpc_status
    if style == "details":
        error["details"] = [
            {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": _upper_snake(reason),
                "domain": "googleapis.com",
                "metadata": {"service": "calendar-json.googleapis.com"},
            }
        ]
    return Response.json(status, {"error": error})


def oauth_error(status: int, error: str, description: str, style: ErrorStyle = "documented") -> Response:
    """An error of the OAuth token endpoint (``{"error", "error_description"}``, or a bare HTML page)."""
    if style == "html":
        return Response(status, f"<html><body>{status} {phrase(status)}</body></html>".encode(), {})
    return Response.json(status, {"error": error, "error_description": description})

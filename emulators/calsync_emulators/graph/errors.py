"""Graph's error body: ``{"error": {"code", "message", "innerError": {"date", "request-id", "client-request-id"}}}``."""

from __future__ import annotations

import datetime as dt
import uuid

from calsync_emulators.server import Response

_DEFAULT_CODES = {
    400: ("ErrorInvalidRequest", "The request is invalid."),
    401: ("InvalidAuthenticationToken", "Access token has expired or is not yet valid."),
    403: ("ErrorAccessDenied", "Access is denied. Check credentials and try again."),
    404: ("ErrorItemNotFound", "The specified object was not found in the store."),
    409: ("ErrorIrresolvableConflict", "Conflict."),
    412: ("ErrorIrresolvableConflict", "The change key passed in the request does not match the current change key "
          "for the item."),
    429: ("ApplicationThrottled", "Application is over its MailboxConcurrency limit."),
    500: ("ErrorInternalServerError", "An internal server error occurred. The operation failed."),
    503: ("ServiceUnavailable", "The service is currently unavailable."),
    504: ("GatewayTimeout", "The gateway did not receive a response in time."),
}  # fmt: skip


class GraphError(Exception):
    """A request Graph refuses; becomes :func:`graph_error`."""

    def __init__(self, status: int, code: str | None = None, message: str | None = None) -> None:
        default_code, default_message = _DEFAULT_CODES.get(status, ("UnknownError", "Error."))
        super().__init__(message or default_message)
        self.status, self.code, self.message = status, code or default_code, message or default_message


def graph_error(
    status: int, code: str | None = None, message: str | None = None, retry_after: float | None = None
) -> Response:
    """An error response as Graph writes one (the code may be empty, as Graph sometimes sends)."""
    error = GraphError(status, code, message)
    request_id = str(uuid.uuid4())
    body = {
        "error": {
            "code": error.code,
            "message": error.message,
            "innerError": {
                "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S"),
                "request-id": request_id,
                "client-request-id": request_id,
            },
        }
    }
    headers = {} if retry_after is None else {"Retry-After": f"{retry_after:g}"}
    answer = Response.json(status, body, headers)
    answer.log = {"code": error.code}
    return answer

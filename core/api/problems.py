"""Every error answer is an RFC 9457 ``application/problem+json`` document naming what to fix.

Validation errors (FastAPI's, and the :class:`InvalidChange` messages of the intake, which use the same
``field: message; ...`` form) become one entry per bad field in ``errors``. A body sent under another media
type than JSON (or none) is 415 naming ``application/json``; a body that is not JSON at all, or that JSON
cannot read (a number of more than 4300 digits), is 400; a body that is JSON but breaks the contract is 422.
The database being unreachable is 503 (nothing was saved: the intent transaction did not commit); every 503
says when to try again in ``Retry-After``. Every ``type`` is one of :data:`ProblemType`, each listed in
docs/PROTOCOL.md (a test checks it).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeVar

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, Field
from sqlalchemy.exc import DataError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from calsync.core.model.errors import (
    AccountStatusConflict,
    EntityNotFound,
    IdempotencyKeyReused,
    InvalidChange,
    InvalidWebhookEndpoint,
    InvalidWebhookUrl,
    JobNotCancellable,
    PermanentError,
    TemporaryError,
    WebhookEndpointNotFound,
)
from calsync.core.model.validation_wording import field_message

log = logging.getLogger(__name__)

RETRY_AFTER_SECONDS = 5  # every 503: a dependency that did not answer is asked again soon

#: Every problem type the API answers with, as ``urn:calsync:problem:<slug>`` (docs/PROTOCOL.md, "Errors").
ProblemType = Literal[
    "malformed", "unsupported-media-type", "validation", "idempotency-key-reused", "rejected", "unstorable",
    "unauthorized", "forbidden", "not-found", "conflict", "too-large", "unavailable", "not-ready", "internal", "http",
]  # fmt: skip

T = TypeVar("T")
PROBLEM_JSON = "application/problem+json"
JSON = "application/json"
_TYPE = "urn:calsync:problem:"
_FIELD_MESSAGE = re.compile(r"^([A-Za-z0-9_.\[\]()-]+): (.+)$", re.DOTALL)


class FieldError(BaseModel):
    """One bad input: where it is (``event.start``, ``query.limit``, ``header.Idempotency-Key``) and why."""

    field: str
    message: str


class Problem(BaseModel):
    """An RFC 9457 problem document."""

    type: str = Field(description="A URI naming the kind of problem, e.g. urn:calsync:problem:validation.")
    title: str
    status: int
    detail: str | None = None
    errors: list[FieldError] | None = Field(default=None, description="Every bad field, for 400 and 422.")


class ProblemError(Exception):
    """Raised by routes and dependencies to answer with a problem document."""

    def __init__(
        self,
        status: int,
        slug: ProblemType,
        title: str,
        detail: str | None = None,
        *,
        errors: list[FieldError] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(detail or title)
        self.problem = Problem(type=_TYPE + slug, title=title, status=status, detail=detail, errors=errors)
        retry = {"Retry-After": str(RETRY_AFTER_SECONDS)} if status == 503 else {}
        self.headers = {**retry, **(headers or {})}

    def response(self) -> JSONResponse:
        """The problem as an HTTP response."""
        document = self.problem.model_dump(exclude_none=True)
        return JSONResponse(document, self.problem.status, self.headers, media_type=PROBLEM_JSON)


_DESCRIPTIONS = {
    400: "The body is not valid JSON.",
    401: "Missing, unknown or revoked API key.",
    403: "The key's scope does not allow this.",
    404: "No such resource for this key's tenant.",
    409: "The resource is not in a state that allows this.",
    413: "The body is larger than CALSYNC_API_MAX_BODY_BYTES.",
    415: "The body is not sent as application/json (`Accept` names it).",
    422: "The request breaks the contract; `errors` names every bad field.",
    503: "The database is unreachable; nothing was saved. Retry after `Retry-After` seconds.",
}

#: The problems every route behind an API key documents.
AUTHENTICATED = (401, 403, 413, 422, 503)


def problems(*codes: int) -> dict[int | str, dict[str, Any]]:
    """What a route documents in OpenAPI for these error statuses, each an ``application/problem+json`` Problem.

    A route that documents 400 reads a JSON body, so it answers 415 to another media type too.
    """
    if 400 in codes:
        codes = (*codes, 415)
    schema = {"$ref": "#/components/schemas/Problem"}
    return {code: {"description": _DESCRIPTIONS[code], "content": {PROBLEM_JSON: {"schema": schema}}} for code in codes}


def not_found(what: str) -> ProblemError:
    """The one answer for a resource that does not exist *for this key's tenant* (another tenant's looks the same)."""
    return ProblemError(404, "not-found", "Not Found", f"{what} does not exist")


def existing(value: T | None, what: str) -> T:
    """``value``, or the one answer for a resource that does not exist for this key's tenant (:func:`not_found`)."""
    if value is None:
        raise not_found(what)
    return value


def invalid(detail: str, errors: list[FieldError]) -> ProblemError:
    """422: the request breaks the contract; ``errors`` names every bad field."""
    return ProblemError(422, "validation", "Unprocessable Content", detail, errors=errors)


def _malformed(why: str) -> ProblemError:
    return ProblemError(400, "malformed", "Malformed Request Body", why)


def field_errors_of(message: str) -> list[FieldError]:
    """Split an intake message (``a.b: why; c: why``) into one entry per field."""
    matches = ((_FIELD_MESSAGE.match(part), part) for part in message.split("; "))
    return [
        FieldError(field=m[1], message=m[2]) if m else FieldError(field="(body)", message=part) for m, part in matches
    ]


def _location(loc: Sequence[Any]) -> str:
    parts = [str(p) for p in loc]
    if parts and parts[0] == "body":
        parts = parts[1:]
    return ".".join(parts) or "(body)"


def _unreadable(request: Request, exc: RequestValidationError) -> ProblemError:
    """FastAPI's validation report: 415 for a body sent as another media type than JSON (or as none), 400 for one
    that is not JSON, else 422 naming every bad field."""
    reported = exc.errors()
    content_type = request.headers.get("content-type")
    # application/json or an application/…+json type, whatever its parameters (; charset=utf-8)
    media = (content_type or "").split(";", 1)[0].strip().lower()
    as_json = media == JSON or (media.startswith("application/") and media.endswith("+json"))
    if exc.body and not as_json and any(err.get("loc", ("",))[0] == "body" for err in reported):
        detail = f"the body must be sent as {JSON} (Content-Type: {content_type or 'none'})"
        errors = [FieldError(field="header.Content-Type", message=f"must be {JSON}")]
        return ProblemError(
            415, "unsupported-media-type", "Unsupported Media Type", detail, errors=errors, headers={"Accept": JSON}
        )
    if any(err.get("type") == "json_invalid" for err in reported):
        detail = "; ".join(str(err.get("msg", "")) for err in reported if err.get("type") == "json_invalid")
        return _malformed(f"the body is not valid JSON: {detail}")
    fields = [FieldError(field=_location(err.get("loc", ())), message=field_message(err)) for err in reported]
    return invalid("the request breaks the contract", fields)


def _problem_of(request: Request, exc: Exception) -> ProblemError:
    """The answer to an error a route or dependency raised (most specific class first)."""
    match exc:
        case ProblemError():
            return exc
        case RequestValidationError():
            return _unreadable(request, exc)
        case StarletteHTTPException(status_code=400) if exc.__cause__ is not None:
            # JSON the parser refused (a number of more than 4300 digits): FastAPI's 400 carries its error as cause.
            why = str(exc.__cause__).split(";", 1)[0] or type(exc.__cause__).__name__
            return _malformed(f"the body cannot be read as JSON: {why}")
        case StarletteHTTPException():
            title = {404: "Not Found", 405: "Method Not Allowed"}.get(exc.status_code, "HTTP Error")
            return ProblemError(exc.status_code, "http", title, str(exc.detail), headers=exc.headers)
        case IdempotencyKeyReused():
            errors = [FieldError(field="header.Idempotency-Key", message=str(exc))]
            return ProblemError(422, "idempotency-key-reused", "Idempotency-Key Reused", str(exc), errors=errors)
        case InvalidChange() | EntityNotFound():
            return invalid(str(exc), field_errors_of(str(exc)))
        case WebhookEndpointNotFound():  # another tenant's endpoint is not found, as one that does not exist
            return not_found(f"webhook endpoint {request.path_params['endpoint_id']}")
        case InvalidWebhookEndpoint():
            field = "url" if isinstance(exc, InvalidWebhookUrl) else "events"  # named as the body's own fields are
            return invalid(str(exc), [FieldError(field=field, message=str(exc))])
        case JobNotCancellable() | AccountStatusConflict():  # the resource's state does not allow it
            return ProblemError(409, "conflict", "Conflict", str(exc))
        case PermanentError():
            return ProblemError(422, "rejected", "Unprocessable Content", f"{exc.reason}: {exc}")
        case DataError():
            # A value the model accepts but the database cannot store (e.g. a NUL character on PostgreSQL).
            detail = f"a value cannot be stored: {str(exc.orig).splitlines()[0]}"
            return ProblemError(422, "unstorable", "Unprocessable Content", detail)
        case TemporaryError():
            log.warning("dependency unavailable: %s", exc, extra={"fields": {"error_class": type(exc).__name__}})
            detail = "a dependency is unreachable; nothing was saved"
            return ProblemError(503, "unavailable", "Service Unavailable", detail)
    raise exc


_ANSWERED = (ProblemError, RequestValidationError, StarletteHTTPException, PermanentError, TemporaryError, DataError)


def install(app: FastAPI) -> None:
    """Answer every error the application can raise with a problem document."""

    async def answer(request: Request, exc: Exception) -> JSONResponse:
        return _problem_of(request, exc).response()

    for kind in _ANSWERED:
        app.add_exception_handler(kind, answer)


async def answer_unexpected(error: Exception, scope: Scope, receive: Receive, send: Send) -> None:
    """Answer an error no handler took with a 500 problem, and log it: the one log line of that error.

    Called by the outermost middleware (core/api/tracing.py), so Starlette's last resort never sees the error:
    it would answer it too and re-raise it for the server to log again (one error, two tracebacks).
    """
    log.error("unhandled error", exc_info=error)
    problem = ProblemError(500, "internal", "Internal Server Error", "an unexpected error; see the server log")
    await problem.response()(scope, receive, send)

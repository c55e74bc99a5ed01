"""Every error answer is an RFC 9457 ``application/problem+json`` document naming what to fix.

Validation errors (FastAPI's, and the :class:`InvalidChange` messages of the intake, which use the same
``field: message; ...`` form) become one entry per bad field in ``errors``. A body sent under another media
type than JSON (or none) is 415 naming ``application/json``; a body that is not JSON at all, or that JSON
cannot read (a number of more than 4300 digits), is 400; a body that is JSON but breaks the contract is 422.
The database being unreachable is 503 with ``Retry-After`` (nothing was saved: the intent transaction did not
commit). Every ``type`` is one of :data:`ProblemType`, each listed in docs/PROTOCOL.md (a test checks it).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, Field
from sqlalchemy.exc import DataError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from calsync.core.model.errors import (
    EntityNotFound,
    IdempotencyKeyReused,
    InvalidChange,
    PermanentError,
    TemporaryError,
)
from calsync.core.model.validation_wording import field_message

log = logging.getLogger(__name__)

#: Every problem type the API answers with, as ``urn:calsync:problem:<slug>`` (docs/PROTOCOL.md, "Errors").
ProblemType = Literal[
    "malformed", "unsupported-media-type", "validation", "idempotency-key-reused", "rejected", "unstorable",
    "unauthorized", "forbidden", "not-found", "conflict", "too-large", "unavailable", "not-ready", "internal", "http",
]  # fmt: skip

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
        errors: Sequence[FieldError] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(detail or title)
        self.status = status
        self.slug = slug
        self.title = title
        self.detail = detail
        self.errors = list(errors) if errors is not None else None
        self.headers = dict(headers or {})

    def response(self) -> JSONResponse:
        """The problem as an HTTP response."""
        doc = Problem(type=_TYPE + self.slug, title=self.title, status=self.status, detail=self.detail,
                      errors=self.errors)  # fmt: skip
        return JSONResponse(
            doc.model_dump(exclude_none=True), status_code=self.status, media_type=PROBLEM_JSON, headers=self.headers
        )


def not_found(what: str) -> ProblemError:
    """The one answer for a resource that does not exist *for this key's tenant* (another tenant's looks the same)."""
    return ProblemError(404, "not-found", "Not Found", f"{what} does not exist")


def field_errors_of(message: str) -> list[FieldError]:
    """Split an intake message (``a.b: why; c: why``) into one entry per field."""
    found = []
    for part in message.split("; "):
        match = _FIELD_MESSAGE.match(part)
        found.append(
            FieldError(field=match[1], message=match[2]) if match else FieldError(field="(body)", message=part)
        )
    return found


def _location(loc: Sequence[Any]) -> str:
    parts = [str(p) for p in loc]
    if parts and parts[0] == "body":
        parts = parts[1:]
    return ".".join(parts) or "(body)"


def validation_problem(exc: RequestValidationError) -> ProblemError:
    """FastAPI's validation report as a 400 (not JSON) or a 422 naming every bad field."""
    errors = exc.errors()
    if any(err.get("type") == "json_invalid" for err in errors):
        detail = "; ".join(str(err.get("msg", "")) for err in errors if err.get("type") == "json_invalid")
        return ProblemError(400, "malformed", "Malformed Request Body", f"the body is not valid JSON: {detail}")
    fields = [FieldError(field=_location(err.get("loc", ())), message=field_message(err)) for err in errors]
    return ProblemError(422, "validation", "Unprocessable Content", "the request breaks the contract", errors=fields)


def is_json(content_type: str | None) -> bool:
    """``application/json`` or an ``application/…+json`` type, whatever its parameters (``; charset=utf-8``)."""
    media = (content_type or "").split(";", 1)[0].strip().lower()
    return media == JSON or (media.startswith("application/") and media.endswith("+json"))


def unsupported_media_type(request: Request, exc: RequestValidationError) -> ProblemError | None:
    """415 for a body the route could not read because it came as another media type than JSON (or as none)."""
    content_type = request.headers.get("content-type")
    if not exc.body or is_json(content_type) or not any(err.get("loc", ("",))[0] == "body" for err in exc.errors()):
        return None
    return ProblemError(
        415, "unsupported-media-type", "Unsupported Media Type",
        f"the body must be sent as {JSON} (Content-Type: {content_type or 'none'})",
        errors=[FieldError(field="header.Content-Type", message=f"must be {JSON}")], headers={"Accept": JSON},
    )  # fmt: skip


def unreadable_body(exc: StarletteHTTPException) -> ProblemError | None:
    """400 for a body that is JSON the parser refused (FastAPI's 400 carries the parser's error as its cause)."""
    if exc.status_code != 400 or exc.__cause__ is None:
        return None
    why = str(exc.__cause__).split(";", 1)[0] or type(exc.__cause__).__name__
    return ProblemError(400, "malformed", "Malformed Request Body", f"the body cannot be read as JSON: {why}")


def install(app: FastAPI, *, retry_after: int) -> None:
    """Answer every error the application can raise with a problem document."""

    @app.exception_handler(ProblemError)
    async def _problem(request: Request, exc: ProblemError) -> JSONResponse:
        return exc.response()

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        return (unsupported_media_type(request, exc) or validation_problem(exc)).response()

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if (unreadable := unreadable_body(exc)) is not None:
            return unreadable.response()
        title = {404: "Not Found", 405: "Method Not Allowed"}.get(exc.status_code, "HTTP Error")
        headers = dict(exc.headers or {})
        return ProblemError(exc.status_code, "http", title, str(exc.detail), headers=headers).response()

    @app.exception_handler(IdempotencyKeyReused)
    async def _reused(request: Request, exc: IdempotencyKeyReused) -> JSONResponse:
        errors = [FieldError(field="header.Idempotency-Key", message=str(exc))]
        return ProblemError(422, "idempotency-key-reused", "Idempotency-Key Reused", str(exc), errors=errors).response()

    @app.exception_handler(InvalidChange)
    async def _invalid(request: Request, exc: InvalidChange) -> JSONResponse:
        return ProblemError(422, "validation", "Unprocessable Content", str(exc),
                            errors=field_errors_of(str(exc))).response()  # fmt: skip

    @app.exception_handler(EntityNotFound)
    async def _missing(request: Request, exc: EntityNotFound) -> JSONResponse:
        return ProblemError(422, "validation", "Unprocessable Content", str(exc),
                            errors=field_errors_of(str(exc))).response()  # fmt: skip

    @app.exception_handler(PermanentError)
    async def _permanent(request: Request, exc: PermanentError) -> JSONResponse:
        return ProblemError(422, "rejected", "Unprocessable Content", f"{exc.reason}: {exc}").response()

    @app.exception_handler(DataError)
    async def _unstorable(request: Request, exc: DataError) -> JSONResponse:
        # A value the model accepts but the database cannot store (e.g. a NUL character on PostgreSQL).
        detail = f"a value cannot be stored: {str(exc.orig).splitlines()[0]}"
        return ProblemError(422, "unstorable", "Unprocessable Content", detail).response()

    @app.exception_handler(TemporaryError)
    async def _unavailable(request: Request, exc: TemporaryError) -> JSONResponse:
        log.warning("dependency unavailable: %s", exc, extra={"fields": {"error_class": type(exc).__name__}})
        return ProblemError(503, "unavailable", "Service Unavailable", "a dependency is unreachable; nothing was saved",
                            headers={"Retry-After": str(retry_after)}).response()  # fmt: skip


async def answer_unexpected(error: Exception, scope: Scope, receive: Receive, send: Send) -> None:
    """Answer an error no handler took with a 500 problem, and log it: the one log line of that error.

    Called by the outermost middleware (core/api/tracing.py), so Starlette's last resort never sees the error:
    it would answer it too and re-raise it for the server to log again (one error, two tracebacks).
    """
    log.error("unhandled error", exc_info=error)
    await ProblemError(500, "internal", "Internal Server Error", "an unexpected error; see the server log").response()(
        scope, receive, send
    )

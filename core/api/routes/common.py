"""What the routers share: the problem responses each route documents."""

from __future__ import annotations

from typing import Any

from calsync.core.api.problems import PROBLEM_JSON

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
_PROBLEM = {"$ref": "#/components/schemas/Problem"}


def problems(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI responses for these error statuses, each an ``application/problem+json`` Problem.

    A route that documents 400 reads a JSON body, so it answers 415 to another media type too.
    """
    if 400 in codes:
        codes = (*codes, 415)
    return {
        code: {"description": _DESCRIPTIONS[code], "content": {PROBLEM_JSON: {"schema": _PROBLEM}}} for code in codes
    }


AUTHENTICATED = (401, 403, 413, 422, 503)

"""Per-tenant API keys sent as ``Authorization: Bearer <key>``, and the scope each route needs.

Scopes nest: ``read`` reads events; ``submit`` also submits changes (a submitter polls what it sent);
``admin`` also operates the tenant's dead letters. A missing or unknown key is 401 with
``WWW-Authenticate: Bearer``; a key without the scope is 403. The key itself never reaches a log line:
only its id does.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from calsync.core.api.problems import ProblemError
from calsync.core.api.services import ApiServices
from calsync.core.model.vocabulary import ApiScope
from calsync.core.store import api_keys

GRANTS: Final[dict[ApiScope, frozenset[ApiScope]]] = {
    "read": frozenset({"read"}),
    "submit": frozenset({"read", "submit"}),
    "admin": frozenset({"read", "submit", "admin"}),
}
_MAX_KEY_LENGTH = 256
_bearer = HTTPBearer(auto_error=False, description="An API key from `calsync api-keys create`.")


@dataclass(frozen=True)
class Principal:
    """Who is calling: the key's id, its tenant and its scope."""

    key_id: str
    tenant_id: str
    scope: ApiScope


def services(request: Request) -> ApiServices:
    """The services the application was created with."""
    found: ApiServices | None = request.app.state.services
    if found is None:
        raise RuntimeError("this application was built without services (OpenAPI document only)")
    return found


def _unauthorized(detail: str, *, error: str | None = None) -> ProblemError:
    challenge = 'Bearer realm="calsync"' + (f', error="{error}"' if error else "")
    return ProblemError(401, "unauthorized", "Unauthorized", detail, headers={"WWW-Authenticate": challenge})


def require(scope: ApiScope) -> Callable[..., Principal]:
    """A dependency that authenticates the caller and checks it holds ``scope``."""

    def dependency(
        request: Request,
        credentials: HTTPAuthorizationCredentials | None = Depends(_bearer),  # noqa: B008
    ) -> Principal:
        if credentials is None or credentials.scheme.lower() != "bearer" or not credentials.credentials:
            raise _unauthorized("send an API key as Authorization: Bearer <key>")
        presented = credentials.credentials
        deps = services(request)
        key = None
        if len(presented) <= _MAX_KEY_LENGTH:
            with deps.db.read() as conn:
                key = api_keys.find_live(conn, presented)
        if key is None:
            raise _unauthorized("the API key is unknown or revoked", error="invalid_token")
        if key.last_used_at is None or _age(key.last_used_at) >= deps.key_touch_interval:
            with deps.db.write() as conn:
                api_keys.touch(conn, key.id, older_than=deps.key_touch_interval)
        principal = Principal(key.id, key.tenant_id, key.scope)
        request.state.principal = principal
        if scope not in GRANTS[key.scope]:
            raise ProblemError(
                403, "forbidden", "Forbidden", f"this key's scope {key.scope!r} does not include {scope!r}",
                headers={"WWW-Authenticate": f'Bearer realm="calsync", error="insufficient_scope", scope="{scope}"'},
            )  # fmt: skip
        return principal

    return dependency


def _age(when: dt.datetime) -> float:
    return (dt.datetime.now(dt.UTC) - when).total_seconds()

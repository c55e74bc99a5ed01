"""Per-tenant API keys sent as ``Authorization: Bearer <key>``, and the scope each route needs.

Operators of the console (``calsync operators create``) call the operator routes (``/v1/pause``) with their own
key the same way (:func:`require_operator`): not a tenant's, so no tenant route takes it, and no tenant key opens
an operator route. A ``viewer`` reads; an ``operator`` also acts.

Scopes nest: ``read`` reads events; ``submit`` also submits changes (a submitter polls what it sent);
``admin`` also operates the tenant's dead letters. A missing or unknown key is 401 with
``WWW-Authenticate: Bearer``; a key without the scope is 403. The key itself never reaches a log line:
only its id does. Keys that authenticated are cached for ``CALSYNC_API_KEY_CACHE_SECONDS`` (:class:`KeyCache`).
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Awaitable, Callable
from typing import Annotated, cast

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool

from calsync.core.api.problems import ProblemError
from calsync.core.api.services import ApiServices
from calsync.core.model.vocabulary import ApiScope, OperatorRole
from calsync.core.store import api_keys, operators

KEY_TOUCH_SECONDS = 60  # a key's last_used_at is written at most once a minute, not on every request
_RANK: dict[ApiScope, int] = {"read": 0, "submit": 1, "admin": 2}  # a scope grants those ranked at or below it
_bearer = HTTPBearer(auto_error=False, description="An API key from `calsync api-keys create`.")


def services(request: Request) -> ApiServices:
    """The services the application was created with."""
    return cast(ApiServices, request.app.state.services)


Services = Annotated[ApiServices, Depends(services)]


def _unauthorized(detail: str, *, error: str | None = None) -> ProblemError:
    challenge = 'Bearer realm="calsync"' + (f', error="{error}"' if error else "")
    return ProblemError(401, "unauthorized", "Unauthorized", detail, headers={"WWW-Authenticate": challenge})


def require(scope: ApiScope) -> Callable[..., Awaitable[api_keys.ApiKey]]:
    """A dependency that authenticates the caller and checks it holds ``scope``."""

    async def dependency(
        request: Request,
        credentials: HTTPAuthorizationCredentials | None = Depends(_bearer),  # noqa: B008
    ) -> api_keys.ApiKey:
        if credentials is None:  # no Authorization header, another scheme, or no key after "Bearer"
            raise _unauthorized("send an API key as Authorization: Bearer <key>")
        presented = credentials.credentials
        cache: KeyCache = request.app.state.key_cache
        principal = cache.get(presented)
        if principal is None:
            principal = await run_in_threadpool(_authenticate, services(request), presented)
            cache.put(presented, principal)
        request.state.principal = principal
        if _RANK[scope] > _RANK[principal.scope]:
            detail = f"this key's scope {principal.scope!r} does not include {scope!r}"
            challenge = f'Bearer realm="calsync", error="insufficient_scope", scope="{scope}"'
            raise ProblemError(403, "forbidden", "Forbidden", detail, headers={"WWW-Authenticate": challenge})
        return principal

    return dependency


Reader = Annotated[api_keys.ApiKey, Depends(require("read"))]
Submitter = Annotated[api_keys.ApiKey, Depends(require("submit"))]
Admin = Annotated[api_keys.ApiKey, Depends(require("admin"))]


def require_operator(role: OperatorRole) -> Callable[..., Awaitable[operators.OperatorRecord]]:
    """A dependency that authenticates an operator's key and checks it holds ``role`` (an operator may also view);
    the operator's record (its ``name`` is what the audit log records)."""

    async def dependency(
        request: Request,
        credentials: HTTPAuthorizationCredentials | None = Depends(_bearer),  # noqa: B008
    ) -> operators.OperatorRecord:
        if credentials is None:
            raise _unauthorized("send an operator key as Authorization: Bearer <key>")
        record = await run_in_threadpool(_find_operator, services(request), credentials.credentials)
        if record is None:
            raise _unauthorized("the operator key is unknown or revoked", error="invalid_token")
        if role == "operator" and record.role != "operator":
            detail = f"this operator's role {record.role!r} cannot act"
            raise ProblemError(403, "forbidden", "Forbidden", detail)
        return record

    return dependency


def _find_operator(deps: ApiServices, presented: str) -> operators.OperatorRecord | None:
    with deps.db.read() as conn:
        return operators.find_by_key(conn, presented)


OperatorViewer = Annotated[operators.OperatorRecord, Depends(require_operator("viewer"))]
OperatorActing = Annotated[operators.OperatorRecord, Depends(require_operator("operator"))]


def _authenticate(deps: ApiServices, presented: str) -> api_keys.ApiKey:
    with deps.db.read() as conn:
        key = api_keys.find_live(conn, presented)
    if key is None:
        raise _unauthorized("the API key is unknown or revoked", error="invalid_token")
    age = (dt.datetime.now(dt.UTC) - key.last_used_at).total_seconds() if key.last_used_at else None
    if age is None or age >= KEY_TOUCH_SECONDS:
        with deps.db.write() as conn:
            api_keys.touch(conn, key.id, older_than=KEY_TOUCH_SECONDS)
    return key


class KeyCache:
    """Keys that authenticated recently, by digest, for ``ttl`` seconds: spares a database read per request.

    Only successful look-ups are kept (an unknown key always reaches the database), so a revoked key is
    refused at most ``ttl`` seconds after ``calsync api-keys revoke``; 0 disables the cache (an entry is then
    expired as it is put). A single dict operation needs no lock; past ``_MAX_ENTRIES`` the cache starts over.
    """

    _MAX_ENTRIES = 10_000

    def __init__(self, ttl: float) -> None:
        self._ttl = ttl
        self._entries: dict[str, tuple[float, api_keys.ApiKey]] = {}

    def get(self, presented: str) -> api_keys.ApiKey | None:
        """The cached principal of a key, if it authenticated within ``ttl``."""
        expires, principal = self._entries.get(api_keys.key_hash(presented), (0.0, None))
        return principal if expires > time.monotonic() else None

    def put(self, presented: str, principal: api_keys.ApiKey) -> None:
        """Remember a key that just authenticated."""
        if len(self._entries) >= self._MAX_ENTRIES:
            self._entries.clear()
        self._entries[api_keys.key_hash(presented)] = (time.monotonic() + self._ttl, principal)

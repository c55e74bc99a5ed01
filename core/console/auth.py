"""Who is using the console: a signed-in operator (a session cookie, or a trusted proxy's header), and what they may do.

The interface the pages use:
- ``SignedIn``: the operator of a signed-in session, any role; a request without one is sent to the sign-in page
  (a GET or HEAD: 303 to ``<console>/sign-in?next=<this path>``) or refused 401 (anything else).
- ``Acting``: a signed-in operator with the role ``operator`` whose request carries the session's CSRF token (form
  field ``csrf_token`` or header ``X-CSRF-Token``); a viewer is 403, a missing or wrong token 403.
- ``Verified``: a signed-in operator of any role whose request carries the CSRF token (signing out).
All set ``request.state.operator`` and ``request.state.csrf_token`` for the templates (templating.render).

How a request is signed in, first match wins:
1. Trusted-proxy mode (``CALSYNC_CONSOLE_TRUSTED_PROXY_HEADER`` set): the header names an operator by name, and it
   counts only when the TCP peer is one of ``CALSYNC_CONSOLE_TRUSTED_PROXIES`` and names a live operator. From any
   other peer it is ignored (and logged once per peer as a warning: someone is trying, or the proxies are wrong).
   ``calsync serve`` runs uvicorn with ``proxy_headers=False``, so the peer is the real TCP peer, not a header.
2. The session cookie ``calsync_console`` (HttpOnly, SameSite=Strict, Path = the console's mount point, Secure when
   the browser's request came over TLS: the request's own scheme, or a trusted proxy's ``X-Forwarded-Proto``).
"""

from __future__ import annotations

import hmac
import logging
from typing import Annotated
from urllib.parse import quote, urlsplit

from fastapi import Depends, HTTPException, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from calsync.core.console import sessions
from calsync.core.console.services import console_services
from calsync.core.console.sessions import Session
from calsync.core.console.settings import ConsoleSettings
from calsync.core.store import operators

log = logging.getLogger(__name__)

COOKIE = "calsync_console"
CSRF_FIELD = "csrf_token"
CSRF_HEADER = "X-CSRF-Token"
_MAX_NAME = 256  # operators.name's length: a longer header value names nobody
_warned_peers: set[str] = set()  # peers whose proxy header was ignored and logged (at most _MAX_WARNED)
_MAX_WARNED = 1024


def console_root(request: Request) -> str:
    """Where the console is mounted (``/console`` in ``calsync serve``; empty when it is the whole application)."""
    return str(request.scope.get("root_path", "")).rstrip("/")


def local_path(value: str | None, root: str) -> str:
    """``value`` when it is a path inside the console (where sign-in may send the browser on), else its overview.

    Only a path under ``root`` in printable ASCII, without a scheme, a host, a backslash or a ``..`` segment: never
    another site (``//evil.example``, ``https://…``, ``/\\evil``), so ``next=`` is no open redirect."""
    fallback = f"{root}/overview"
    if not value or len(value) > 2048 or any(not "\x21" <= c <= "\x7e" or c == "\\" for c in value):
        return fallback
    if value.startswith("//") or not value.startswith(f"{root}/"):  # first: urlsplit("//[") raises
        return fallback
    parts = urlsplit(value)
    if parts.scheme or parts.netloc or ".." in parts.path.split("/"):
        return fallback
    return value


def over_tls(request: Request) -> bool:
    """Whether the browser's request came over TLS: its own scheme, or a trusted proxy's ``X-Forwarded-Proto``."""
    if request.url.scheme == "https":
        return True
    peer = request.client.host if request.client else None
    forwarded = request.headers.get("x-forwarded-proto", "").split(",")[0].strip().lower()
    return forwarded == "https" and console_services(request).access.is_trusted_proxy(peer)


def set_cookie(
    request: Request, response: Response, value: str, *, name: str = COOKIE, max_age: int | None = None
) -> None:
    """Give the browser a console cookie: the session's (by default; it ends with the browser, or at the idle
    expiry) or the sign-in form's. HttpOnly, SameSite=Strict, the console's path, Secure over TLS."""
    response.set_cookie(name, value, max_age=max_age, path=console_root(request) or "/", httponly=True,
                        samesite="strict", secure=over_tls(request))  # fmt: skip


def clear_cookie(request: Request, response: Response, *, name: str = COOKIE) -> None:
    """Tell the browser to forget a console cookie (the session's by default): the same cookie, expired."""
    set_cookie(request, response, "", name=name, max_age=0)


def _proxied_name(request: Request, access: ConsoleSettings) -> str | None:
    """The operator's name a trusted proxy's header gives, or None when the header does not count."""
    header = access.console_trusted_proxy_header
    named = request.headers.get(header) if header else None
    if header is None or named is None:
        return None
    peer = request.client.host if request.client else None
    if not access.is_trusted_proxy(peer):
        if str(peer) not in _warned_peers and len(_warned_peers) < _MAX_WARNED:
            _warned_peers.add(str(peer))
            log.warning("console: ignored %s from %s, which is not a trusted proxy", header, peer)
        return None
    name = named.strip()
    return name if name and len(name) <= _MAX_NAME else None


def session_of(request: Request) -> Session | None:
    """This request's live session: a trusted proxy's user's (started at their first request), else the cookie's;
    None when it has neither. Its use is noted when :func:`sessions.needs_touch` says so."""
    console = console_services(request)
    idle, cookie = console.access.console_session_idle_seconds, request.cookies.get(COOKIE)
    name = _proxied_name(request, console.access)
    with console.api.db.read() as conn:
        operator = operators.find_by_name(conn, name) if name else None
        if operator is not None:
            session = sessions.proxy_session(conn, operator.id, idle_seconds=idle)
        else:
            session = sessions.find(conn, cookie, idle_seconds=idle) if cookie else None
    if session is None and operator is not None:
        with console.api.db.write() as conn:
            _no_cookie, started = sessions.start(conn, operator, proxied=True)
        return started
    if session is not None and sessions.needs_touch(session):
        with console.api.db.write() as conn:
            sessions.touch(conn, session.id)
    return session


async def signed_in(request: Request) -> Session:
    """The signed-in operator of this request: their live session (name, role, CSRF token)."""
    session = await run_in_threadpool(session_of, request)
    if session is None:
        if request.method in ("GET", "HEAD"):
            root = console_root(request)
            query = f"?{request.url.query}" if request.url.query else ""
            here = quote(local_path(request.url.path + query, root), safe="/")
            raise HTTPException(303, "sign in first", headers={"Location": f"{root}/sign-in?next={here}"})
        raise HTTPException(401, "sign in first")
    request.state.operator, request.state.csrf_token = session, session.csrf_token
    return session


async def verified(request: Request, operator: Annotated[Session, Depends(signed_in)]) -> Session:
    """The signed-in operator (any role), whose request carries its session's CSRF token (a form field or a
    header); 403 without it."""
    expected = operator.csrf_token
    presented: object = request.headers.get(CSRF_HEADER)
    if presented is None:
        presented = (await request.form()).get(CSRF_FIELD)
    if not isinstance(presented, str) or not hmac.compare_digest(presented.encode(), expected.encode()):
        raise HTTPException(403, "this form is out of date or did not come from the console: reload the page")
    return operator


async def acting(operator: Annotated[Session, Depends(verified)]) -> Session:
    """The signed-in operator, allowed to act, with this request's CSRF token checked."""
    if not operator.can_act:
        raise HTTPException(403, f"{operator.name} is a viewer: only an operator may change anything")
    return operator


SignedIn = Annotated[Session, Depends(signed_in)]
Acting = Annotated[Session, Depends(acting)]
Verified = Annotated[Session, Depends(verified)]

"""Signing in and out: an operator's key (``cso_…``) opens a session; signing out ends it.

A tenant's API key (``csk_…``) is refused by its prefix with a message that says so (operators are not tenants). Any
other refused key gets one message, whatever the reason (unknown, revoked, mistyped), so the form tells nobody
which keys exist. Both sign-in and sign-out are audited (``console.sign_in``, ``console.sign_out``).

The sign-in form carries a token of its own, also set as a SameSite=Strict cookie when the form is shown: a
sign-in posted from another site arrives without that cookie and is refused (403), so no page elsewhere can sign a
browser in as somebody else's operator (login CSRF; the session's token cannot help before there is a session).
"""

from __future__ import annotations

import hmac
import secrets
from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import RedirectResponse
from starlette.responses import Response

from calsync.core.console import sessions
from calsync.core.console.auth import Verified, clear_cookie, console_root, local_path, set_cookie
from calsync.core.console.services import Console
from calsync.core.console.templating import render
from calsync.core.store import audit, operators
from calsync.core.store.api_keys import KEY_PREFIX as TENANT_KEY_PREFIX

router = APIRouter()

FORM_COOKIE = "calsync_console_sign_in"
FORM_MAX_AGE = 3600  # seconds a shown form stays usable
TENANT_KEY_REFUSED = "A tenant's API key cannot open the console: sign in with an operator key (cso_…)."
KEY_REFUSED = "That key does not open the console."
FORM_REFUSED = "This sign-in form is out of date or came from another site: sign in again below."


def _form(
    request: Request, next_path: str, *, error: str | None = None, done: str | None = None, status: int = 200
) -> Response:
    """The form with a fresh token, in the page and in the form's cookie."""
    token = secrets.token_urlsafe(32)
    context = {"title": "Sign in", "next": next_path, "error": error, "done": done, "csrf_token": token}
    response = render(request, "sign_in.html", context, status_code=status)
    set_cookie(request, response, token, name=FORM_COOKIE, max_age=FORM_MAX_AGE)
    return response


@router.get("/sign-in", name="sign_in")
def sign_in_form(request: Request, next: str | None = None, signed_out: bool = False) -> Response:
    """The sign-in form; ``next`` is where to go after it (a console path, else the overview)."""
    done = "You are signed out." if signed_out else None
    return _form(request, local_path(next, console_root(request)), done=done)


@router.post("/sign-in")
def sign_in(
    request: Request,
    console: Console,
    key: Annotated[str, Form()] = "",
    next: Annotated[str, Form()] = "",
    csrf_token: Annotated[str, Form()] = "",
) -> Response:
    """Open a session for the operator whose key this is and go on to ``next``; refuse a form that was not shown
    to this browser (403) and any key but a live operator's (401)."""
    target = local_path(next, console_root(request))
    shown = request.cookies.get(FORM_COOKIE, "")
    if not shown or not hmac.compare_digest(csrf_token.encode(), shown.encode()):
        return _form(request, target, error=FORM_REFUSED, status=403)
    presented = key.strip()
    if presented.startswith(TENANT_KEY_PREFIX):
        return _form(request, target, error=TENANT_KEY_REFUSED, status=401)
    with console.api.db.write() as conn:
        operator = operators.find_by_key(conn, presented) if presented else None
        if operator is None:
            return _form(request, target, error=KEY_REFUSED, status=401)
        cookie, _session = sessions.start(conn, operator)
        audit.record(conn, actor=operator.name, action="console.sign_in", subject=f"operator {operator.name}", count=1)
    response = RedirectResponse(target, status_code=303)
    set_cookie(request, response, cookie)
    clear_cookie(request, response, name=FORM_COOKIE)
    return response


@router.post("/sign-out")
def sign_out(request: Request, console: Console, session: Verified) -> Response:
    """End this session (any role may, with the page's CSRF token) and forget the cookie."""
    with console.api.db.write() as conn:
        sessions.end(conn, session.id)
        audit.record(conn, actor=session.name, action="console.sign_out", subject=f"operator {session.name}", count=1)
    response = RedirectResponse(f"{console_root(request)}/sign-in?signed_out=1", status_code=303)
    clear_cookie(request, response)
    return response

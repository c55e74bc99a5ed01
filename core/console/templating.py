"""The console's Jinja2 environment (templates and static files inside the package, times in UTC and relative) and
its two kinds of answer: a rendered page, a 303 redirect."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.responses import RedirectResponse
from fastapi.templating import Jinja2Templates
from markupsafe import Markup, escape
from starlette.datastructures import URL
from starlette.responses import Response

HERE = Path(__file__).parent
STATIC_DIR = HERE / "static"
templates = Jinja2Templates(directory=HERE / "templates")


#: The units of :func:`relative`, largest first: seconds in one, and its symbol.
_UNITS = ((86400, "d"), (3600, "h"), (60, "min"), (1, "s"))


def relative(seconds: float) -> str:
    """``seconds`` from now in words: "12 s ago", "in 3 min", "2 h ago", "4 d ago"."""
    size = abs(seconds)
    per, unit = next(((per, unit) for per, unit in _UNITS if size >= per), (1, "s"))  # under 1 s: "0 s"
    amount = f"{size / per:.0f} {unit}"
    return f"{amount} ago" if seconds >= 0 else f"in {amount}"


def when(value: dt.datetime | float | int | None, now: dt.datetime | None = None) -> Markup:
    """A ``<time>`` element: the instant in UTC (a naive one is UTC; a number is a Unix time), and how long ago (or
    until) it is; an em dash for no time."""
    if value is None:
        return Markup("&mdash;")
    at = value if isinstance(value, dt.datetime) else dt.datetime.fromtimestamp(float(value), dt.UTC)
    utc = (at if at.tzinfo is not None else at.replace(tzinfo=dt.UTC)).astimezone(dt.UTC)
    shown = f"{utc:%Y-%m-%d %H:%M:%S} UTC"
    ago = relative(((now or dt.datetime.now(dt.UTC)) - utc).total_seconds())
    return Markup('<time datetime="{0}" title="{1}">{1} ({2})</time>').format(
        escape(utc.isoformat(timespec="seconds")), shown, ago
    )


templates.env.filters.update(when=when, relative=relative)


def render(request: Request, name: str, context: dict[str, Any], *, status_code: int = 200) -> Response:
    """Render template ``name`` for ``request``; the signed-in operator and the CSRF token come from the request's
    state (set by the console's sign-in dependency), so every page and form can show and carry them."""
    values = {
        "operator": getattr(request.state, "operator", None),
        "csrf_token": getattr(request.state, "csrf_token", ""),
        **context,
    }
    return templates.TemplateResponse(request, name, values, status_code=status_code)


def redirect(url: str | URL, **params: str | int) -> RedirectResponse:
    """303 See Other to ``url`` with ``params`` set in its query (a filter, a post-redirect-get's message)."""
    return RedirectResponse(str(URL(str(url)).include_query_params(**params)), status_code=303)

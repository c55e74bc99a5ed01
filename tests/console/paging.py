"""Following a console list's keyset pages as a person would: the "Next →"/"Older →" link until there is none."""

from __future__ import annotations

import html
import re
from collections.abc import Callable

import httpx

_NEXT = re.compile(r'rel="next" id="older" href="\?([^"]+)"')


def every_page(client: httpx.Client, path: str, query: str, listed: Callable[[str], list[str]]) -> list[str]:
    """What ``listed`` reads of each page of ``path`` from ``query`` on, following the pages' next link."""
    seen: list[str] = []
    address: str | None = f"{path}?{query}"
    while address is not None:
        text = client.get(address).text
        seen += listed(text)
        found = _NEXT.search(text)
        address = f"{path}?{html.unescape(found.group(1))}" if found else None
    return seen

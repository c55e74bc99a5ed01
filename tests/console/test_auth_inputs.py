"""What a browser (or anyone) may send the console's sign-in, generated: keys, ``next=`` paths, a proxy's header.

Whatever arrives, sign-in never fails with a 500, never opens a session for a key that is not an operator's, never
sends the browser off the console, and a proxy's header signs in exactly the operator it names.
"""

from __future__ import annotations

import html
import re
from urllib.parse import urlsplit

import pytest
from fastapi import FastAPI
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from calsync.core.console.auth import COOKIE, local_path
from calsync.core.console.pages.sign_in import KEY_REFUSED, TENANT_KEY_REFUSED
from calsync.core.store import operators
from tests.api.live import LiveApi
from tests.console.conftest import new_operator, submit_sign_in
from tests.console.test_auth import _browser, _trust

_LIVE = settings(max_examples=40, deadline=None, database=None, suppress_health_check=list(HealthCheck))
_SEGMENT = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E, exclude_characters="/?#\\%"), min_size=1)
# Header values HTTP can carry: visible ASCII and spaces inside (h11 refuses the rest before the console sees it).
_HEADER_VALUE = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=300).map(str.strip)


@given(
    st.one_of(st.text(), st.from_regex(r"\A(/|//|/\\|https?://|/console)[^\n]*", fullmatch=True)),
    st.sampled_from(["", "/console"]),
)
@settings(max_examples=500, deadline=None, database=None)
def test_next_is_a_path_inside_the_console_or_the_overview(value: str, root: str) -> None:
    kept = local_path(value, root)
    parts = urlsplit(kept)
    assert kept == value or kept == f"{root}/overview"
    assert kept.startswith(f"{root}/") and not kept.startswith("//")
    assert not parts.scheme and not parts.netloc and "\\" not in kept and ".." not in parts.path.split("/")
    assert all("\x21" <= c <= "\x7e" for c in kept)


# A host, another scheme, a backslash browsers read as a slash, a climb out, bytes a browser would encode, an IPv6
# host that does not parse.
OFF_THE_SITE = ["//evil.example", "/\\evil.example", "/\\/evil.example", "https://evil.example/", "/console/../x",
                "javascript:alert(1)", "/console/\tx", "/console/é", "//[", "//[::1"]  # fmt: skip


@pytest.mark.parametrize("root", ["", "/console"])
@pytest.mark.parametrize("value", OFF_THE_SITE)
def test_known_ways_off_the_site_are_refused(root: str, value: str) -> None:
    assert local_path(value, root) == f"{root}/overview"


@given(st.lists(_SEGMENT.filter(lambda s: s not in {".", ".."}), min_size=1, max_size=4))
@settings(max_examples=200, deadline=None, database=None)
def test_a_page_of_the_console_is_kept_as_next(segments: list[str]) -> None:
    path = "/console/" + "/".join(segments)
    assert local_path(path, "/console") == path


@given(key=st.text(max_size=100))
@_LIVE
def test_no_key_but_an_operators_opens_the_console(served: LiveApi, key: str) -> None:
    with _browser(served) as browser:
        answer = submit_sign_in(browser, key)
    expected = TENANT_KEY_REFUSED if key.strip().startswith("csk_") else KEY_REFUSED
    assert answer.status_code == 401 and expected in html.unescape(answer.text)
    assert COOKIE not in answer.cookies  # no session


@given(asked=st.text(max_size=200))
@_LIVE
def test_sign_in_goes_on_to_a_console_path_whatever_next_says(served: LiveApi, asked: str) -> None:
    _name, key = new_operator(served, "viewer")
    with _browser(served) as browser:
        answer = submit_sign_in(browser, key, next_path=asked)
    location = urlsplit(answer.headers["location"])
    assert answer.status_code == 303 and not location.scheme and not location.netloc
    assert location.path.startswith("/console/")


@given(value=_HEADER_VALUE)
@_LIVE
def test_a_proxys_header_signs_in_exactly_the_operator_it_names(
    served: LiveApi, served_app: FastAPI, value: str
) -> None:
    with served.db.write() as conn:
        known = operators.find_by_name(conn, value) is not None if value else False
        if not known and value and len(value) <= 256 and not value.startswith("x"):
            operators.create(conn, name=value, role="viewer", proxy=True)  # most names exist, some do not
            known = True
    _trust(served_app, "127.0.0.1/32")
    with _browser(served) as browser:
        answer = browser.get("/audit", headers={"X-Forwarded-Email": value})
    assert answer.status_code == (200 if known else 303)
    if known:
        who = re.search(r'id="who">(.*?) <small>', answer.text)
        assert who is not None and html.unescape(who.group(1)) == value

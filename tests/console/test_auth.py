"""Signing in to the console, as a browser does it: keys, sessions, their cookie, idle expiry, CSRF, roles, sign-out.

What is checked is what an operator meets (a redirect, a refusal, a page) and what the database holds afterwards
(sessions, audit rows), through the live ``calsync serve`` application.
"""

from __future__ import annotations

import datetime as dt
import html
from collections.abc import Iterator
from contextlib import closing
from dataclasses import replace
from typing import Annotated

import httpx
import pytest
from fastapi import APIRouter, FastAPI, Form
from sqlalchemy import select, update

from calsync.core.console import auth, sessions
from calsync.core.console.auth import COOKIE, Acting
from calsync.core.console.pages.sign_in import FORM_COOKIE, FORM_REFUSED, KEY_REFUSED, TENANT_KEY_REFUSED
from calsync.core.console.settings import ConsoleSettings
from calsync.core.store import operators
from calsync.core.store.schema import audit_log, operator_sessions
from calsync.core.store.schema import operators as operators_table
from tests.api.live import LiveApi
from tests.console.conftest import ConsoleClient, console_of, form_token, new_operator, sign_in, submit_sign_in


@pytest.fixture
def acting_page(served_app: FastAPI) -> Iterator[None]:
    """A state-changing page for these tests only (``POST /console/test-act``), guarded by ``Acting`` like any."""
    router = APIRouter()

    @router.post("/test-act")
    def act(operator: Acting, note: Annotated[str, Form()] = "") -> dict[str, str]:
        return {"acted": operator.name, "note": note}

    console_of(served_app).include_router(router)
    yield


def _audit(served: LiveApi, action: str) -> list[tuple[str, str]]:
    with served.db.read() as conn:
        query = select(audit_log.c.actor, audit_log.c.subject).where(audit_log.c.action == action)
        return [(row.actor, row.subject) for row in conn.execute(query.order_by(audit_log.c.id))]


def _browser(served: LiveApi) -> httpx.Client:
    return httpx.Client(base_url=served.url + "/console", timeout=30, follow_redirects=False)


def test_an_operator_key_opens_a_session_whose_cookie_a_script_cannot_read(served: LiveApi) -> None:
    name, key = new_operator(served, "viewer")
    with _browser(served) as browser:
        answer = submit_sign_in(browser, key, next_path="/console/audit")
        assert answer.status_code == 303 and answer.headers["location"] == "/console/audit"
        cookie = answer.headers["set-cookie"]
        assert cookie.startswith(f"{COOKIE}=")
        attributes = {part.strip().lower() for part in cookie.split(";")[1:]}
        assert {"httponly", "samesite=strict", "path=/console"} <= attributes
        assert "secure" not in attributes  # plain HTTP from an untrusted peer: a Secure cookie would never come back
        page = browser.get("/audit")
        assert page.status_code == 200 and name in page.text
    assert _audit(served, "console.sign_in") == [(name, f"operator {name}")]


def test_without_a_session_a_page_sends_the_browser_to_sign_in_and_a_post_is_refused(served: LiveApi) -> None:
    with _browser(served) as browser:
        answer = browser.get("/audit", params={"actor": "a b"})
        assert answer.status_code == 303
        assert answer.headers["location"] == "/console/sign-in?next=/console/audit%3Factor%3Da%2Bb"
        assert browser.post("/sign-out", data={"csrf_token": "x"}).status_code == 401
        browser.cookies.set(COOKIE, "not-a-session", path="/console")
        assert browser.get("/audit").status_code == 303


def test_a_tenant_key_is_refused_by_name_and_any_other_key_with_one_message(served: LiveApi) -> None:
    _name, revoked_key = new_operator(served, "operator")
    with served.db.write() as conn:
        operators.revoke(conn, _name)
    with _browser(served) as browser:
        tenant = submit_sign_in(browser, served.key(scope="admin"))
        assert tenant.status_code == 401 and TENANT_KEY_REFUSED in html.unescape(tenant.text)
        for key in ["cso_wrong", revoked_key, "", "   "]:
            answer = submit_sign_in(browser, key)
            assert answer.status_code == 401 and KEY_REFUSED in html.unescape(answer.text), key
            assert COOKIE not in answer.cookies  # no session
    assert _audit(served, "console.sign_in") == []


def test_a_sign_in_not_posted_from_the_form_this_browser_was_shown_is_refused(served: LiveApi) -> None:
    _name, key = new_operator(served, "operator")
    with _browser(served) as browser, _browser(served) as elsewhere:
        token = form_token(browser.get("/sign-in").text)
        for posted in [{"key": key}, {"key": key, "csrf_token": token + "x"}]:
            answer = browser.post("/sign-in", data=posted)
            assert answer.status_code == 403 and FORM_REFUSED in html.unescape(answer.text)
            assert COOKIE not in answer.cookies
        # another site's page posting the form: its browser holds no form cookie of ours, whatever the token
        assert elsewhere.post("/sign-in", data={"key": key, "csrf_token": token}).status_code == 403
        elsewhere.cookies.clear()  # the refusal showed the form again, with a cookie: forget it
        assert elsewhere.post("/sign-in", data={"key": key, "csrf_token": ""}).status_code == 403
        fresh = form_token(browser.get("/sign-in").text)
        assert browser.post("/sign-in", data={"key": key, "csrf_token": fresh}).status_code == 303
        assert FORM_COOKIE not in browser.cookies  # the form's token is spent
    assert len(_audit(served, "console.sign_in")) == 1


def test_signing_out_needs_the_csrf_token_ends_the_session_and_is_audited(served: LiveApi) -> None:
    name, key = new_operator(served, "viewer")
    with closing(sign_in(served, key)) as browser:
        token = form_token(browser.get("/audit").text)
        cookie = browser.cookies[COOKIE]
        assert browser.post("/sign-out", data={}).status_code == 403
        assert browser.post("/sign-out", data={"csrf_token": token + "x"}).status_code == 403
        answer = browser.post("/sign-out", data={"csrf_token": token})
        assert answer.status_code == 303 and answer.headers["location"] == "/console/sign-in?signed_out=1"
        assert COOKIE not in browser.cookies
        assert "You are signed out" in browser.get("/sign-in?signed_out=1").text
        browser.cookies.set(COOKIE, cookie, path="/console")  # the old cookie, kept by someone
        assert browser.get("/audit").status_code == 303
    assert _audit(served, "console.sign_out") == [(name, f"operator {name}")]


@pytest.mark.usefixtures("acting_page")
def test_a_viewer_cannot_act_and_an_operator_only_with_the_session_token(console_client: ConsoleClient) -> None:
    viewer, operator = console_client("viewer"), console_client("operator")
    viewer_token = form_token(viewer.get("/audit").text)
    assert viewer.post("/test-act", data={"csrf_token": viewer_token}).status_code == 403
    token = form_token(operator.get("/audit").text)
    assert operator.post("/test-act", data={"note": "n"}).status_code == 403
    assert operator.post("/test-act", data={"csrf_token": viewer_token}).status_code == 403  # another session's
    assert operator.post("/test-act", headers={"X-CSRF-Token": "wrong"}).status_code == 403
    acted = operator.post("/test-act", data={"csrf_token": token, "note": "n"})
    assert acted.status_code == 200 and acted.json()["note"] == "n"
    assert operator.post("/test-act", headers={"X-CSRF-Token": token}).status_code == 200


def test_a_session_unused_for_the_idle_expiry_is_over(served: LiveApi) -> None:
    _name, key = new_operator(served, "viewer")
    with closing(sign_in(served, key)) as browser:
        idle = 1800  # CALSYNC_CONSOLE_SESSION_IDLE_SECONDS' default
        _age_sessions(served, dt.timedelta(seconds=idle - 10))
        assert browser.get("/audit").status_code == 200  # still live, and now noted as used:
        assert dt.datetime.now(dt.UTC) - _last_seen(served) < dt.timedelta(seconds=10)  # the clock restarted
        _age_sessions(served, dt.timedelta(seconds=idle + 1))
        assert browser.get("/audit").status_code == 303


def test_a_session_is_noted_as_used_at_most_every_half_minute(served: LiveApi) -> None:
    _name, key = new_operator(served, "viewer")
    with closing(sign_in(served, key)) as browser:
        first = _last_seen(served)
        assert browser.get("/audit").status_code == 200
        assert _last_seen(served) == first  # just signed in: no write
        _age_sessions(served, dt.timedelta(seconds=sessions.TOUCH_EVERY + 1))
        aged = _last_seen(served)
        assert browser.get("/audit").status_code == 200
        assert _last_seen(served) > aged


def test_revoking_an_operator_ends_their_open_sessions(served: LiveApi) -> None:
    name, key = new_operator(served, "operator")
    with closing(sign_in(served, key)) as browser, closing(sign_in(served, key)) as other:
        assert browser.get("/audit").status_code == 200
        with served.db.write() as conn:
            assert operators.revoke(conn, name)
            assert not operators.revoke(conn, name)
        assert browser.get("/audit").status_code == 303
        assert other.get("/audit").status_code == 303
    with served.db.read() as conn:
        ended = conn.execute(select(operator_sessions.c.ended_at)).scalars().all()
    assert len(ended) == 2 and all(at is not None for at in ended)


def test_a_revoked_operator_is_found_neither_by_key_nor_by_name(served: LiveApi) -> None:
    name, key = new_operator(served, "operator")
    with served.db.write() as conn:
        found = operators.find_by_key(conn, key)
        assert found is not None and found == operators.find_by_name(conn, name)
        operators.revoke(conn, name)
        assert operators.find_by_key(conn, key) is None and operators.find_by_name(conn, name) is None


def test_a_revoked_operators_session_is_refused_even_if_it_was_not_ended(served: LiveApi) -> None:
    name, key = new_operator(served, "viewer")
    with closing(sign_in(served, key)) as browser:
        with served.db.write() as conn:  # revoked by hand, say, or by a release that did not end sessions
            conn.execute(
                update(operators_table).where(operators_table.c.name == name).values(revoked_at=dt.datetime.now(dt.UTC))
            )
        assert browser.get("/audit").status_code == 303


@pytest.mark.parametrize(
    "asked", ["//evil.example/x", "https://evil.example/", "/\\evil.example", "/console/../evil", "/elsewhere", ""]
)
def test_sign_in_never_sends_the_browser_off_the_console(served: LiveApi, asked: str) -> None:
    _name, key = new_operator(served, "viewer")
    with _browser(served) as browser:
        answer = submit_sign_in(browser, key, next_path=asked)
        assert answer.headers["location"] == "/console/overview"
        form = browser.get("/sign-in", params={"next": asked}).text
        assert 'name="next" value="/console/overview"' in form


def _age_sessions(served: LiveApi, by: dt.timedelta) -> None:
    with served.db.write() as conn:
        conn.execute(update(operator_sessions).values(last_seen_at=dt.datetime.now(dt.UTC) - by))


def _last_seen(served: LiveApi) -> dt.datetime:
    with served.db.read() as conn:
        seen: dt.datetime = conn.execute(select(operator_sessions.c.last_seen_at)).scalar_one()
    return seen


def _trust(served_app: FastAPI, *networks: str, header: str = "X-Forwarded-Email") -> None:
    """Configure the live console's trusted proxy as CALSYNC_CONSOLE_TRUSTED_PROXY_HEADER/…_PROXIES would."""
    console = console_of(served_app)
    settings = ConsoleSettings(console_trusted_proxy_header=header, console_trusted_proxies=",".join(networks))
    console.state.console = replace(console.state.console, access=settings)


def test_a_trusted_proxys_header_signs_its_user_in_only_from_the_proxys_address(
    served: LiveApi, served_app: FastAPI, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(auth, "_warned_peers", set())  # no earlier test's warning
    name, _key = new_operator(served, "viewer")
    with served.db.write() as conn:
        _none, proxied = operators.create(conn, name="alice@example.test", role="operator", proxy=True)
    assert _none is None
    with _browser(served) as browser:
        _trust(served_app, "10.0.0.0/8")  # the live server's peer is 127.0.0.1: not the proxy
        assert browser.get("/audit", headers={"X-Forwarded-Email": proxied.name}).status_code == 303
        assert browser.get("/audit", headers={"X-Forwarded-Email": proxied.name}).status_code == 303
        assert [r.message for r in caplog.records if "not a trusted proxy" in r.message] == [
            "console: ignored X-Forwarded-Email from 127.0.0.1, which is not a trusted proxy"
        ]  # once, however often it comes
        _trust(served_app, "10.0.0.0/8", "127.0.0.1/32")
        page = browser.get("/audit", headers={"X-Forwarded-Email": proxied.name})
        assert page.status_code == 200 and proxied.name in page.text
        assert "set-cookie" not in page.headers  # the proxy names the user on every request
        token = form_token(page.text)
        again = browser.get("/audit", headers={"X-Forwarded-Email": proxied.name})
        assert form_token(again.text) == token  # one session (and CSRF token) per proxied operator
        for nobody in ["bob@example.test", "", "x" * 300]:
            assert browser.get("/audit", headers={"X-Forwarded-Email": nobody}).status_code == 303, nobody
        with served.db.write() as conn:
            operators.revoke(conn, proxied.name)
        assert browser.get("/audit", headers={"X-Forwarded-Email": proxied.name}).status_code == 303
        assert browser.get("/audit", headers={"X-Forwarded-Email": name}).status_code == 200  # a keyed operator too


@pytest.mark.usefixtures("acting_page")
def test_a_proxied_operator_acts_with_their_sessions_csrf_token(served: LiveApi, served_app: FastAPI) -> None:
    with served.db.write() as conn:
        operators.create(conn, name="alice@example.test", role="operator", proxy=True)
    _trust(served_app, "127.0.0.1/32")
    as_alice = {"X-Forwarded-Email": "alice@example.test"}
    with _browser(served) as browser:
        token = form_token(browser.get("/audit", headers=as_alice).text)
        assert browser.post("/test-act", headers=as_alice).status_code == 403
        assert browser.post("/test-act", headers={**as_alice, "X-CSRF-Token": token}).status_code == 200


def test_the_cookie_is_secure_when_a_trusted_proxy_says_the_browser_used_tls(
    served: LiveApi, served_app: FastAPI
) -> None:
    _name, key = new_operator(served, "viewer")
    tls = {"X-Forwarded-Proto": "https"}
    with _browser(served) as browser:
        _trust(served_app, "10.0.0.0/8")
        untrusted = submit_sign_in(browser, key, headers=tls)
        assert "secure" not in untrusted.headers["set-cookie"].lower()
        _trust(served_app, "127.0.0.0/8")
        trusted = submit_sign_in(browser, key, headers=tls)
        assert "; secure" in trusted.headers["set-cookie"].lower()

"""The console in a real headless Chromium, used as a person would: against a live ``calsync serve``, a ``calsync
worker`` and the Google emulator (tests/console/browser.py).

An on-call operator signs in with the key ``calsync operators create`` printed, watches a failing account's dead
letters appear on the overview without reloading it, finds them on the dead-letters page and a job by its id, fixes
the fault, bulk-replays the account's dead letters and watches them sync, pauses and resumes, and signs out. A viewer
sees no action and a forged post is refused; a post without the CSRF token is refused; a tenant's key does not open
the console. The keyboard reaches the sign-in button and the navigation; no page scrolls sideways at 1280 x 800 or on
a phone (390 x 844). With ``CONSOLE_SCREENSHOTS=docs/console`` the main pages are saved there as PNGs (the README's).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from selenium import webdriver
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.keys import Keys

from calsync.core.redis.pause import PauseSwitch
from calsync_emulators.server import RunningEmulator
from tests.conftest import missing
from tests.console.browser import DESKTOP, PHONE, Browser, LiveConsole, chromium, live_console
from tests.integration.provider_support import TENANT, wait_synced

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).parents[2]
SHOTS = ROOT / os.environ["CONSOLE_SCREENSHOTS"] if os.environ.get("CONSOLE_SCREENSHOTS") else None
NAVIGATION = ("overview", "events", "dead-letters", "accounts", "webhooks", "audit")


@pytest.fixture(scope="module")
def live(
    tmp_path_factory: pytest.TempPathFactory, redis_url: str, postgres_available: bool, google_server: RunningEmulator
) -> Iterator[LiveConsole]:
    """The module's live calsync: serve, a worker, the Google emulator."""
    if not postgres_available:
        missing("postgresql", "not reachable")
    with live_console(tmp_path_factory.mktemp("live-console"), redis_url, google_server) as running:
        yield running


@pytest.fixture(scope="module")
def driver(chromium_binaries: tuple[str, str]) -> Iterator[webdriver.Chrome]:
    """One headless chromium for the module (its cookies are cleared before each test)."""
    started = chromium(*chromium_binaries)
    yield started
    started.quit()


@pytest.fixture
def browser(driver: webdriver.Chrome, live: LiveConsole) -> Browser:
    """A person at a fresh, signed-out browser of desktop size."""
    person = Browser(driver, live.url)
    person.open("sign-in")
    driver.delete_all_cookies()
    person.size(*DESKTOP)
    return person


def _paused(live: LiveConsole) -> bool:
    return PauseSwitch(live.pipeline.clients.redis, live.pipeline.clients.keys).state() is not None


def _failing_account(live: LiveConsole, name: str, count: int) -> tuple[str, list[str]]:
    """A Google account whose calendar refuses every write (403: permanent, dead-lettered at once) and ``count``
    events submitted to it: the account and the events' ids."""
    account = live.google_account(name)
    live.emulator.fault(path=re.escape(f"{name}@example.com"), status=403, message="Calendar usage limits exceeded")
    return account, live.submit(account, count, f"evt-{name}")


def test_a_tenant_key_does_not_open_the_console(live: LiveConsole, browser: Browser) -> None:
    key = live.tenant_key()
    browser.sign_in(key)
    assert browser.wait_for("#error").text and browser.find("#who") is None
    browser.open("overview")
    browser.wait_for("#key")  # sent back to sign in
    with httpx.Client(base_url=live.url, headers={"Authorization": f"Bearer {key}"}) as http:
        answer = http.get("/overview")
    assert answer.status_code != 200 and 'id="who"' not in answer.text


def _tab_through(browser: Browser, presses: int) -> list[str]:
    """Press Tab ``presses`` times from the top of the page: what had the focus after each press (id or href)."""
    browser.driver.execute_script("document.activeElement && document.activeElement.blur(); window.scrollTo(0, 0)")
    reached = []
    for _ in range(presses):
        ActionChains(browser.driver).send_keys(Keys.TAB).perform()
        focused = browser.driver.switch_to.active_element
        reached.append(focused.get_attribute("id") or focused.get_attribute("href") or focused.tag_name)
    return reached


def test_the_keyboard_reaches_the_sign_in_button_and_the_navigation(live: LiveConsole, browser: Browser) -> None:
    browser.open("sign-in")
    browser.wait_for("#key")
    assert "sign-in" in _tab_through(browser, 6)
    browser.sign_in(live.operator("viewer", "keyboard@example.test"))
    browser.wait_for("#who")
    reached = _tab_through(browser, 12)
    assert all(any(str(r).endswith(f"/console/{page}") for r in reached) for page in NAVIGATION), reached
    assert "sign-out" in _tab_through(browser, 14)


def test_an_operator_follows_a_failing_account_from_the_overview_to_its_replay(
    live: LiveConsole, browser: Browser
) -> None:
    browser.sign_in(live.operator("operator", "oncall@example.test"))
    browser.wait_for("#overview")
    assert browser.path.startswith("/overview") and "oncall@example.test" in browser.text("#who")
    browser.driver.execute_script("window.notReloaded = true")
    account, events = _failing_account(live, "bob", 3)
    # Live: the overview's region shows the three dead letters without the page being loaded again.
    browser.wait("the overview to show 3 forbidden", lambda: "3 forbidden" in browser.text("#overview"), timeout=60)
    assert browser.driver.execute_script("return window.notReloaded") is True
    # The dead-letters page, filtered by the account, lists them.
    browser.click("nav a[href$='/dead-letters']")
    browser.fill("#dl-filter", account_id=account)
    browser.wait("three dead letters", lambda: len(browser.all("tr.dead-letter")) == 3)
    assert all(account in row.text for row in browser.all("tr.dead-letter"))
    # A job found by its id.
    job_id = live.pipeline.target(events[0], account).job_id
    assert job_id is not None
    browser.click("nav a[href$='/events']")
    browser.fill("#search", job_id=job_id)  # one job: its event's page, its target and history
    browser.wait("the job's target", lambda: job_id in browser.text("#target"))
    assert events[0] in browser.text("main h1") and "Forbidden" in browser.text("#history")
    # The fault fixed, the account's dead letters replayed at once, and synced.
    live.emulator.clear_faults()
    browser.open(f"dead-letters?account_id={account}")
    browser.click("#replay-all")
    assert browser.wait_for("#confirm").is_displayed() and browser.text("#confirm-count") == "3"
    browser.click("#confirm button[type='submit']")
    browser.wait("the replay to finish", lambda: "Finished" in browser.text("#progress"), timeout=60)
    wait_synced(live.pipeline, {(event, account): 1 for event in events}, timeout=60)
    browser.open(f"events?account_id={account}&status=synced")
    browser.wait("three synced targets", lambda: len(browser.all("#results tr.hit")) == 3)
    # Pause and resume.
    browser.open("overview")
    browser.fill("form:has(#pause)", reason="provider incident")
    browser.wait("paused", lambda: "Paused" in browser.text("#paused"))
    assert _paused(live)
    browser.click("#resume")
    browser.wait("running", lambda: "Running" in browser.text("#paused"))
    assert not _paused(live)
    browser.open("audit")
    actions = browser.text("#audit")
    assert all(verb in actions for verb in ("pause", "resume", "replay")), actions
    # Signed out, the console asks to sign in again.
    browser.click("#sign-out")
    browser.wait_for("#key")
    browser.open("overview")
    browser.wait_for("#key")


def test_a_viewer_sees_no_action_and_a_forged_post_is_refused(live: LiveConsole, browser: Browser) -> None:
    live.google_account("dora")
    browser.sign_in(live.operator("viewer", "viewer@example.test"))
    browser.wait_for("#overview")
    assert browser.find("#pause") is None and browser.find("#resume") is None
    token = browser.wait_for("#sign-out").find_element("xpath", "..").find_element("name", "csrf_token")
    csrf = str(token.get_attribute("value"))
    browser.open("dead-letters?status=open")
    assert browser.find("#replay-all") is None and browser.find("button.replay") is None
    browser.open("accounts")
    browser.wait_for("tr.account")
    assert browser.find("button.disable") is None and browser.find("button.enable") is None
    assert browser.fetch("POST", "overview/pause", {"csrf_token": csrf, "reason": "forged"}) == 403
    assert browser.fetch("POST", "accounts/acc-dora/disable", {"csrf_token": csrf}) == 403
    assert not _paused(live)


def test_a_post_without_the_csrf_token_is_refused(live: LiveConsole, browser: Browser) -> None:
    browser.sign_in(live.operator("operator", "no-token@example.test"))
    browser.wait_for("#pause")
    assert browser.fetch("POST", "overview/pause", {"reason": "no token"}) == 403
    assert browser.fetch("POST", "overview/pause", {"reason": "wrong token", "csrf_token": "x" * 43}) == 403
    assert not _paused(live)


def test_no_page_scrolls_sideways_on_a_desktop_or_a_phone(live: LiveConsole, browser: Browser) -> None:
    _failing_account(live, "carol", 4)
    browser.sign_in(live.operator("operator", "layout@example.test"))
    browser.wait("the overview to show 4 forbidden", lambda: "4 forbidden" in browser.text("#overview"), timeout=60)
    browser.open("dead-letters?status=open")
    record = str(browser.wait_for("tr.dead-letter th a").get_attribute("href")).removeprefix(live.url)
    pages = {"overview": "overview", "events": "events", "event": f"events/{TENANT}/evt-carol-0",
             "dead-letters": "dead-letters?status=open", "dead-letter": record, "accounts": "accounts",
             "webhooks": "webhooks", "audit": "audit"}  # fmt: skip
    wide: list[str] = []
    for width, height in (DESKTOP, PHONE):
        browser.size(width, height)
        for name, path in pages.items():
            browser.open(path)
            browser.wait_for("main h1")
            if browser.horizontal_overflow() > 0:
                wide.append(f"{name} at {width}x{height}: {browser.horizontal_overflow()} px too wide")
            if (width, height) == DESKTOP:
                browser.screenshot(SHOTS, name)
    assert wide == []

"""The overview's script in a real headless Chromium: the region refreshes on its own every 2 s without reloading
the page, shows ``#stale`` once readings have failed for three intervals, and clears it when they come back."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi import FastAPI
from selenium import webdriver
from selenium.webdriver.common.by import By

from calsync.core.messaging.messages import sync_message
from calsync.core.model.payload import new_payload
from tests.api.live import LiveApi
from tests.console.browser import chromium
from tests.console.conftest import console_of, new_operator
from tests.support import Pipeline, wait_until

pytestmark = pytest.mark.slow


@pytest.fixture
def browser(chromium_binaries: tuple[str, str]) -> Iterator[webdriver.Chrome]:
    """A headless Chromium (skipped without Debian's chromium and chromedriver; CI requires them)."""
    driver = chromium(*chromium_binaries)
    yield driver
    driver.quit()


def test_the_region_refreshes_itself_and_says_when_it_is_stale(
    pipeline: Pipeline, served: LiveApi, served_app: FastAPI, browser: webdriver.Chrome
) -> None:
    queue = pipeline.settings.queue

    def ready() -> str:  # read in one script: the region may be swapped between two WebDriver calls
        script = """const rows = [...document.querySelectorAll('#queues tr')];
                    return rows.find(r => r.cells[0].textContent === arguments[0]).cells[2].textContent;"""
        return str(browser.execute_script(script, queue))

    def stale() -> bool:
        return bool(browser.execute_script("return !document.getElementById('stale').hidden;"))

    _name, key = new_operator(served, "viewer")
    browser.get(served.url + "/console/sign-in")  # then the overview, the default next page
    browser.find_element(By.ID, "key").send_keys(key)
    browser.find_element(By.ID, "sign-in").click()
    wait_until(lambda: browser.find_elements(By.ID, "overview"), timeout=15, what="the overview after signing in")
    browser.execute_script("window.notReloaded = true;")
    assert ready() == "0"
    for n in range(2):
        payload = new_payload(tenant_id="tenant-1", entity_id=f"evt-{n}", account_id="acc-1", operation="create",
                              version=1, trace_id="live")  # fmt: skip
        pipeline.broker.enqueue(sync_message(queue, payload))
    wait_until(lambda: ready() == "2", timeout=15, what="the region to show the queued jobs")
    assert browser.execute_script("return window.notReloaded") is True  # swapped in place, not a page reload
    assert not stale()

    console = console_of(served_app)
    services = console.state.console
    console.state.console = None  # every reading fails (500) from now on
    try:
        wait_until(stale, timeout=20, what="the stale banner")
        assert "Not updated since" in browser.execute_script("return document.getElementById('stale').textContent;")
        assert ready() == "2"  # the last good reading is still shown
    finally:
        console.state.console = services
    wait_until(lambda: not stale(), timeout=15, what="a good reading")
    readings: set[str] = set()

    def good_readings() -> bool:  # more than three intervals of good readings, the banner away at every look
        assert not stale()
        readings.add(str(browser.execute_script("return document.getElementById('updated-at').textContent;")))
        return len(readings) > 4

    wait_until(good_readings, timeout=20, what="four more good readings without the stale banner")

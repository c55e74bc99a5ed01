"""The console as a person uses it: a live ``calsync serve`` and ``calsync worker`` (real subprocesses, over a Redis
namespace and a PostgreSQL schema of their own), the Google emulator as the calendar provider, and Debian's chromium
driven by Selenium through its chromedriver, headless.

:func:`live_console` starts the processes; :class:`Browser` is the person: it opens pages, types, clicks, and waits
for what a person would wait for (an element, a text), never for a fixed time.
"""

from __future__ import annotations

import base64
import contextlib
import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
import redis
from selenium import webdriver
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException, WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webelement import WebElement

from calsync.core.config.settings import Settings
from calsync.core.model.vocabulary import OperatorRole
from calsync.core.observability.pipeline_state import live_workers
from calsync.core.store import api_keys
from calsync.core.store.crypto import generate_key
from calsync_emulators.server import RunningEmulator
from tests.cli.process import calsync
from tests.integration.provider_support import TENANT, add_account
from tests.observability.conftest import CalsyncProcess
from tests.providers.google.gcal_support import Emulator
from tests.support import Pipeline, free_port, make_settings, wait_until

POSTGRES_DSN = "postgresql://postgres@127.0.0.1:5432/test"
DESKTOP = (1280, 800)
PHONE = (390, 844)
# The live set-up's timings: beats every 0.5 s (the overview's workers), no housekeeping or drift sweeps (nothing
# but the test's own jobs runs), the test-scale retry schedule of make_settings.
LIVE_SETTINGS: dict[str, Any] = {
    "heartbeat_interval": 0.5,
    "heartbeat_ttl": 3,
    "maintenance_interval": 0,
    "bulk_threshold": 0,
}


@dataclass
class LiveConsole:
    """The running processes, the pipeline that drives them from the test, and the emulator they call."""

    settings: Settings
    pipeline: Pipeline
    emulator: Emulator
    url: str  # the console's root, e.g. http://127.0.0.1:PORT/console
    processes: dict[str, CalsyncProcess]  # by command: serve, worker

    def operator(self, role: OperatorRole, name: str) -> str:
        """``calsync operators create`` as an administrator runs it: the one-time key it prints."""
        done = calsync("operators", "create", "--name", name, "--role", role, settings=self.settings)
        assert done.returncode == 0, done.stderr
        return str(json.loads(done.stdout)["key"])

    def tenant_key(self) -> str:
        """A tenant's admin API key (what must not open the console)."""
        with self.pipeline.clients.db.write() as conn:
            key, _ = api_keys.create(conn, tenant_id=TENANT, scope="admin", name="tenant admin")
        return key

    def google_account(self, name: str) -> str:
        """A Google account whose calendar is ``{name}@example.com`` on the emulator."""
        credentials = self.emulator.user_credentials()
        return add_account(self.pipeline, "google", f"{name}@example.com", credentials, account_id=f"acc-{name}")

    def submit(self, account: str, count: int, prefix: str) -> list[str]:
        """``count`` new events for ``account``: their entity ids."""
        receipts = [self.pipeline.submit([account], tenant=TENANT, entity_id=f"{prefix}-{i}") for i in range(count)]
        return [receipt.entity_id for receipt in receipts]

    def output(self) -> str:
        """The processes' logs (their tails), for a failure message."""
        return "\n".join(f"--- calsync {name}\n{process.output()}" for name, process in self.processes.items())


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code < 500
    except httpx.HTTPError:
        return False


@contextlib.contextmanager
def live_console(directory: Path, redis_url: str, google_server: RunningEmulator) -> Iterator[LiveConsole]:
    """``calsync serve`` and ``calsync worker`` over a fresh namespace and schema, calling the Google emulator."""
    namespace, schema = f"csb{uuid.uuid4().hex[:10]}", f"b_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(POSTGRES_DSN, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    emulator = Emulator.fresh(google_server)
    settings = make_settings(
        directory, broker_url=redis_url, redis_url=redis_url, redis_namespace=namespace, queue="calendar",
        database_url=f"postgresql+psycopg://postgres@127.0.0.1:5432/test?options=-csearch_path%3D{schema}",
        metrics_port=free_port(), secret_key=generate_key(), google_api_endpoint=emulator.api_endpoint,
        **LIVE_SETTINGS,
    )  # fmt: skip
    pipeline = Pipeline(settings)  # migrates the schema
    port = free_port()
    commands = {"serve": ["--host", "127.0.0.1", "--port", str(port)], "worker": ["--processes", "1", "--threads", "4"]}
    processes: dict[str, CalsyncProcess] = {}
    live = LiveConsole(settings, pipeline, emulator, f"http://127.0.0.1:{port}/console", processes)
    try:
        for name, args in commands.items():
            processes[name] = CalsyncProcess(settings, [name, *args], directory / f"{name}.log")
        wait_until(lambda: _answers(f"http://127.0.0.1:{port}/healthz"), timeout=60, what="calsync serve")
        clients = pipeline.clients
        wait_until(lambda: live_workers(clients.redis, clients.keys), timeout=60, what="the worker's heartbeat")
        yield live
    except BaseException:
        print(live.output())
        raise
    finally:
        for process in processes.values():
            process.stop()
        pipeline.close()
        with psycopg.connect(POSTGRES_DSN, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")
        client = redis.Redis.from_url(redis_url)
        keys = list(client.scan_iter(match=f"{namespace}:*", count=1000))
        if keys:
            client.delete(*keys)
        client.close()


def chromium(browser: str, driver: str) -> webdriver.Chrome:
    """Headless chromium at the desktop size, driven through ``driver``."""
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                     f"--window-size={DESKTOP[0]},{DESKTOP[1]}"):  # fmt: skip
        options.add_argument(argument)
    return webdriver.Chrome(options=options, service=Service(driver))


class Browser:
    """A person at the console: what they open, type, click and see; every wait is for something to show up."""

    def __init__(self, driver: webdriver.Chrome, root: str) -> None:
        self.driver = driver
        self.root = root

    # --- looking ----------------------------------------------------------------------------------
    def open(self, path: str) -> None:
        """Go to a console page (``path`` below /console, e.g. ``overview`` or ``accounts?tenant_id=t``)."""
        self.driver.get(f"{self.root}/{path.lstrip('/')}")

    @property
    def path(self) -> str:
        """The current page's path and query below /console."""
        return str(self.driver.current_url).removeprefix(self.root)

    def find(self, css: str) -> WebElement | None:
        """The first element matching ``css``, or None."""
        try:
            return self.driver.find_element(By.CSS_SELECTOR, css)
        except NoSuchElementException:
            return None

    def all(self, css: str) -> list[WebElement]:
        """Every element matching ``css``."""
        return list(self.driver.find_elements(By.CSS_SELECTOR, css))

    def text(self, css: str) -> str:
        """The visible text of the first element matching ``css`` ('' when there is none)."""
        try:
            found = self.find(css)
            return "" if found is None else str(found.text)
        except StaleElementReferenceException:  # the live region was replaced while read: read it again
            return self.text(css)

    def wait(self, what: str, check: Callable[[], Any], timeout: float = 40) -> Any:
        """Wait until ``check`` gives something truthy (a person watching the page), failing with ``what``."""

        def looked() -> Any:
            try:
                return check()
            except (StaleElementReferenceException, WebDriverException):
                return None

        try:
            return wait_until(looked, timeout=timeout, what=what)
        except AssertionError as exc:  # say what the person saw instead
            raise AssertionError(f"{exc}; on {self.path} the page read: {self.text('main')[:800]!r}") from None

    def wait_for(self, css: str, timeout: float = 40) -> WebElement:
        """The element matching ``css`` once it is there."""
        found: WebElement = self.wait(f"{css} on {self.path}", lambda: self.find(css), timeout)
        return found

    # --- acting -----------------------------------------------------------------------------------
    def click(self, css: str) -> None:
        """Click the element matching ``css`` (waiting for it)."""
        self.wait_for(css).click()

    def fill(self, form: str, **fields: str) -> None:
        """Type into the named inputs of ``form`` (replacing what they held), then submit it with its button."""
        for name, value in fields.items():
            field = self.wait_for(f"{form} [name='{name}']")
            if field.tag_name == "select":
                self.driver.execute_script("arguments[0].value = arguments[1]", field, value)
            else:
                field.clear()
                field.send_keys(value)
        self.wait_for(f"{form} [type='submit']").click()

    def sign_in(self, key: str) -> None:
        """Sign in at the sign-in page with an operator's key."""
        self.open("sign-in")
        self.wait_for("#key").send_keys(key)
        self.click("#sign-in")

    def fetch(self, method: str, path: str, form: dict[str, str]) -> int:
        """Send a form from the page's own script (with its session cookie), as a forger would: the status."""
        script = """
            const [method, url, fields, done] = arguments;
            fetch(url, {method, body: new URLSearchParams(fields), redirect: 'manual', credentials: 'same-origin'})
              .then(r => done(r.status), e => done(String(e)));
        """
        status: int = self.driver.execute_async_script(script, method, f"{self.root}/{path.lstrip('/')}", form)
        return status

    # --- the page's size --------------------------------------------------------------------------
    def size(self, width: int, height: int) -> None:
        """A viewport of ``width`` x ``height`` CSS pixels: a phone's (touch, its device scale) below 600 wide."""
        self.driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
        if width < 600:
            metrics = {"width": width, "height": height, "deviceScaleFactor": 3, "mobile": True}
            self.driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
        else:
            self.driver.set_window_size(width, height)

    def horizontal_overflow(self) -> int:
        """By how many CSS pixels the page is wider than the viewport (0: no horizontal page scroll)."""
        script = "return document.documentElement.scrollWidth - document.documentElement.clientWidth"
        overflow: int = self.driver.execute_script(script)
        return overflow

    def screenshot(self, directory: Path | None, name: str) -> None:
        """The whole page (up to 2,400 px tall) at the current width as ``name``.png in ``directory``, when
        screenshots were asked for (else nothing)."""
        if directory is None:
            return
        width = int(self.driver.execute_script("return document.documentElement.clientWidth"))
        content = self.driver.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
        whole = {"width": width, "height": min(int(content["height"]), 2400), "deviceScaleFactor": 1, "mobile": False}
        self.driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", whole)
        try:
            shot = self.driver.execute_cdp_cmd("Page.captureScreenshot", {"format": "png"})
        finally:
            self.driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
        directory.mkdir(parents=True, exist_ok=True)
        (directory / f"{name}.png").write_bytes(base64.b64decode(shot["data"]))

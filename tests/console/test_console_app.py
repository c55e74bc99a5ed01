"""The console is mounted by ``calsync serve``: its static files are served from the package, nothing from a CDN."""

from __future__ import annotations

import html
import re
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.api.live import LiveApi
from tests.console.conftest import ConsoleClient

TEMPLATES = Path(__file__).parents[2] / "core" / "console" / "templates"


def test_the_stylesheet_is_served_from_the_package(served: LiveApi) -> None:
    with served.client() as http:
        answer = http.get("/console/static/console.css")
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/css")


def test_no_template_loads_anything_from_another_origin() -> None:
    for template in TEMPLATES.glob("*.html"):
        text = template.read_text()
        assert "http://" not in text and "//cdn" not in text, template.name


@pytest.mark.parametrize("page", ["overview", "events", "dead-letters", "accounts", "webhooks", "audit"])
def test_every_form_and_link_of_a_page_stays_in_the_console(
    served: LiveApi, console_client: ConsoleClient, page: str
) -> None:
    # Pages link with url_for(name), which searches the whole application from its root: an API route of the same
    # name would win, and a console form would post to the API (found when /v1/pause arrived).
    answer = console_client("operator").get(f"/{page}")
    assert answer.status_code == 200
    targets = [urlsplit(html.unescape(t)) for t in re.findall(r'(?:action|href)="([^"#]+)"', answer.text)]
    local = [t.path for t in targets if not t.netloc or t.netloc == urlsplit(served.url).netloc]
    assert local and [path for path in local if path.startswith("/") and not path.startswith("/console/")] == []

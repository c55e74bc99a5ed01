"""The console is mounted by ``calsync serve``: its static files are served from the package, nothing from a CDN."""

from __future__ import annotations

from pathlib import Path

from tests.api.live import LiveApi

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

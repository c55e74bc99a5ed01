"""An error no handler expects is answered 500 as a problem and logged once (the server does not log it again)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from calsync.core.api.services import services_from_clients
from tests.api.live import LiveApi, serving
from tests.support import Pipeline, change


class _Broken:
    """An intake with a bug."""

    def submit(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("a bug in the intake")


@pytest.fixture
def broken_api(pipeline: Pipeline) -> Iterator[LiveApi]:
    services = replace(services_from_clients(pipeline.clients), intake=_Broken(), key_cache_seconds=0)
    with serving(services) as live:  # type: ignore[arg-type]
        yield live


def test_an_unexpected_error_is_one_500_problem_and_one_log_line(
    broken_api: LiveApi, pipeline: Pipeline, caplog: pytest.LogCaptureFixture
) -> None:
    account = pipeline.account()
    with caplog.at_level(logging.INFO), broken_api.client(broken_api.key()) as http:
        answer = http.post("/v1/changes", json=change([account]), headers={"X-Request-Id": "req-bug"})

    assert answer.status_code == 500
    assert answer.headers["content-type"] == "application/problem+json"
    assert answer.json()["type"] == "urn:calsync:problem:internal"
    tracebacks = [r for r in caplog.records if r.exc_info is not None]
    assert [(r.levelname, str(r.exc_info[1])) for r in tracebacks if r.exc_info] == [("ERROR", "a bug in the intake")]

"""The Graph adapter's requests add no log line of their own to a job's: httpx's per-request INFO line is off."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from calsync.core.config.logging import configure_logging
from calsync.providers.graph.provider import GraphProvider
from tests.providers.graph.conftest import MakeAccount, MakeEvent, target_for
from tests.support import logging_kept


@pytest.fixture
def json_logs() -> Iterator[io.StringIO]:
    """The worker's JSON logging at INFO into a buffer; the test session's root handlers and levels restored after."""
    stream = io.StringIO()
    with logging_kept("httpx"):
        configure_logging("INFO", stream=stream)
        yield stream


def test_a_create_and_its_token_call_log_nothing_at_info(
    json_logs: io.StringIO, provider: GraphProvider, make_account: MakeAccount, make_event: MakeEvent
) -> None:
    account = make_account()
    event = make_event()
    provider.upsert(account, event, target_for(account, event))
    logging.getLogger("calsync.jobs").info("job success")  # the job's own line still gets through
    lines = [json.loads(line) for line in json_logs.getvalue().splitlines()]
    assert [line["message"] for line in lines] == ["job success"]

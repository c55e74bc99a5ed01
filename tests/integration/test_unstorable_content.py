"""A NUL character (PostgreSQL's text cannot hold it) is refused as invalid content at every door, on both
databases alike, and nothing is saved (issue 30, finding 5: ``calsync submit`` said "database unavailable",
exit 1, and the intake actor retried it for ~23 minutes)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import replace

import pytest
from sqlalchemy import func, select

from calsync.actors.cli.shell import BadInput
from calsync.core.api.services import services_from_clients
from calsync.core.model.errors import InvalidChange
from calsync.core.model.intake import INTAKE_JOB
from calsync.core.store.schema import events
from tests.api.live import LiveApi, serving
from tests.integration.intake_support import intake_pipeline, send_raw, wait_intake_letter
from tests.integration.provider_support import run_cli
from tests.support import Pipeline, change

pytestmark = [pytest.mark.integration, pytest.mark.both_databases]
__all__ = ["intake_pipeline"]

TITLE = "Budget\u0000review"
SAYS = "event.title: contains U+0000 (NUL) at character 7"


def _saved(pipeline: Pipeline) -> int:
    with pipeline.clients.db.read() as conn:
        return int(conn.execute(select(func.count()).select_from(events)).scalar_one())


@pytest.fixture
def api(pipeline: Pipeline) -> Iterator[LiveApi]:
    """``calsync serve`` over the test's pipeline."""
    with serving(replace(services_from_clients(pipeline.clients), key_cache_seconds=0)) as live:
        yield live


def test_the_python_api_refuses_it(pipeline: Pipeline) -> None:
    account = pipeline.account()
    with pytest.raises(InvalidChange, match=re.escape(SAYS)):
        pipeline.producer.submit("tenant-1", change([account], title=TITLE))
    assert _saved(pipeline) == 0


@pytest.mark.parametrize("where", ["trace_id", "request_key"])
def test_the_python_api_refuses_it_in_the_ids_stored_with_the_change(pipeline: Pipeline, where: str) -> None:
    account = pipeline.account()
    with pytest.raises(InvalidChange, match=r"(trace|request)_id: contains U\+0000 \(NUL\) at character 2"):
        pipeline.producer.submit("tenant-1", change([account]), **{where: "r\u0000-1"})
    assert _saved(pipeline) == 0


def test_calsync_submit_refuses_it_as_bad_input(pipeline: Pipeline) -> None:
    account = pipeline.account()
    document = json.dumps(change([account], title=TITLE))
    done = run_cli(pipeline.settings, "submit", "--tenant", "tenant-1", "--file", "-", stdin=document)
    assert (done.exit_code, done.stdout) == (BadInput.exit_code, "")
    assert done.stderr.startswith("calsync: error: ") and SAYS in done.stderr
    assert _saved(pipeline) == 0


def test_http_answers_422_naming_the_field(pipeline: Pipeline, api: LiveApi) -> None:
    account = pipeline.account()
    with api.client(api.key()) as http:
        answer = http.post("/v1/changes", json=change([account], title=TITLE))
    problem = answer.json()
    assert (answer.status_code, problem["type"]) == (422, "urn:calsync:problem:validation")
    assert problem["errors"][0]["field"] == "event.title" and "NUL" in problem["errors"][0]["message"]
    assert _saved(pipeline) == 0


def test_the_intake_actor_dead_letters_it_at_once_as_an_invalid_change(intake_pipeline: Pipeline) -> None:
    pipeline = intake_pipeline
    account = pipeline.account()
    message = send_raw(pipeline, {"tenant_id": "tenant-1", "change": change([account], title=TITLE)})
    with pipeline.worker(threads=1):
        letter = wait_intake_letter(pipeline, message.message_id)
    assert (letter.job_type, letter.reason, letter.error_class, letter.attempts) == (
        INTAKE_JOB, "invalid change", "InvalidChange", 1)  # fmt: skip
    assert SAYS in letter.last_error
    assert pipeline.outcomes().get("retry_scheduled", 0) == 0 and _saved(pipeline) == 0

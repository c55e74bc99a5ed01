"""Every door gives a change the same verdict, on both databases, and what they accept every adapter can write.

Documents come from docs/schemas/change.schema.json and from the edges it cannot show
(tests/integration/change_strategies.py), plus the values of issue 30 in every run. Each goes through the
four doors in turn: the Python API (``Intake.submit``), ``calsync submit`` (in-process), ``POST /v1/changes``
on a live server, and the intake actor's body (the message argument as Dramatiq decodes it). Each door must
accept it or refuse it as the caller's mistake (a permanent error, exit 2, a 4xx); none may fail otherwise
(exit 1, a 5xx, a temporary or unknown error), and all must agree. An accepted upsert is then read back as
the worker reads it and written through the real Google, Exchange (EWS) and Graph adapters to their
emulators: each must succeed.
"""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any, Literal

import pytest
from hypothesis import HealthCheck, example, given, settings

from calsync.core.api.services import services_from_clients
from calsync.core.model.calendar import Target
from calsync.core.model.errors import PermanentError
from calsync.core.producer.submit import intake_actor
from calsync.core.store import events
from tests.api.live import LiveApi, serving
from tests.integration.change_strategies import changes, explicit_examples
from tests.integration.content_support import Emulators, emulators
from tests.integration.provider_support import run_cli
from tests.support import Pipeline

pytestmark = [pytest.mark.integration, pytest.mark.both_databases]
__all__ = ["emulators"]

TENANT = "tenant-1"
ACCOUNTS = ("acc-1", "acc-2")
EXAMPLES = 80

Verdict = Literal["accepted", "refused"]


@pytest.fixture
def pipeline(settings_factory: Any, emulators: Emulators) -> Iterator[Pipeline]:
    """A runtime on this test's database whose adapters talk to the emulators; two memory accounts to name."""
    built = Pipeline(settings_factory(**emulators.settings()))
    for account_id in ACCOUNTS:
        built.account(TENANT, account_id)
    yield built
    built.app.providers.close()
    built.close()


@pytest.fixture
def api(pipeline: Pipeline) -> Iterator[LiveApi]:
    """``calsync serve`` over the test's pipeline."""
    with serving(replace(services_from_clients(pipeline.clients), key_cache_seconds=0)) as live:
        yield live


def _python(pipeline: Pipeline, doc: dict[str, Any]) -> tuple[Verdict, str | None]:
    try:
        receipt = pipeline.producer.submit(TENANT, copy.deepcopy(doc))
    except PermanentError:
        return "refused", None
    return "accepted", receipt.entity_id


def _cli(pipeline: Pipeline, doc: dict[str, Any]) -> Verdict:
    done = run_cli(pipeline.settings, "submit", "--tenant", TENANT, "--file", "-", stdin=json.dumps(doc))
    assert done.exit_code in (0, 2), f"calsync submit: exit {done.exit_code}: {done.stderr}"
    return "accepted" if done.exit_code == 0 else "refused"


def _http(send: Callable[[str], Any], doc: dict[str, Any]) -> Verdict:
    answer = send(json.dumps(doc))
    assert answer.status_code in (202, 400, 422), f"HTTP {answer.status_code}: {answer.text}"
    return "accepted" if answer.status_code == 202 else "refused"


def _actor(pipeline: Pipeline, doc: dict[str, Any]) -> Verdict:
    body = intake_actor(pipeline.producer, lambda _message: str(uuid.uuid4()))
    try:
        body(json.loads(json.dumps({"tenant_id": TENANT, "change": doc})))  # as the message arrives
    except PermanentError:  # dead-lettered at once by the retry middleware
        return "refused"
    return "accepted"


def _written_by_every_adapter(pipeline: Pipeline, emulators: Emulators, entity_id: str) -> None:
    with pipeline.clients.db.read() as conn:
        state = events.get_event(conn, TENANT, entity_id)  # as the worker reads it
    assert state is not None
    for name, account in emulators.accounts(TENANT).items():
        ref = pipeline.app.providers.get(name).upsert(account, state, Target(entity_id, account.id, TENANT))
        assert ref.external_id, name


def test_every_door_gives_the_same_verdict_and_every_adapter_writes_what_they_accept(
    pipeline: Pipeline, api: LiveApi, emulators: Emulators
) -> None:
    verdicts: dict[Verdict, int] = {"accepted": 0, "refused": 0}
    with api.client(api.key(TENANT)) as http:

        def post(body: str) -> Any:
            return http.post("/v1/changes", content=body, headers={"Content-Type": "application/json"})

        @settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                         HealthCheck.filter_too_much])  # fmt: skip
        @given(doc=changes(ACCOUNTS))
        def every_door(doc: dict[str, Any]) -> None:
            verdict, entity_id = _python(pipeline, doc)
            others = {"calsync submit": _cli(pipeline, doc), "HTTP": _http(post, doc), "intake": _actor(pipeline, doc)}
            assert others == dict.fromkeys(others, verdict), f"Python: {verdict}"
            verdicts[verdict] += 1
            if verdict == "accepted" and doc.get("operation") == "upsert" and entity_id is not None:
                _written_by_every_adapter(pipeline, emulators, entity_id)

        for doc in explicit_examples(ACCOUNTS):
            every_door = example(doc=doc)(every_door)
        every_door()
    assert verdicts["accepted"] >= EXAMPLES // 5 and verdicts["refused"] >= EXAMPLES // 5, verdicts

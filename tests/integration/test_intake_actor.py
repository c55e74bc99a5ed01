"""The intake actor ``submit_change``: a change sent as a Dramatiq message is saved and synced, once per request;
a bad one is dead-lettered with its reason and can be replayed once fixed; a database failure is retried."""

from __future__ import annotations

import urllib.parse
from typing import Any

import psycopg
import pytest
from sqlalchemy import text

from calsync.core.messaging.messages import intake_message
from calsync.core.model.dlq_reports import ReplayedOut
from calsync.core.model.intake import INTAKE_JOB, IntakeMessage
from calsync.core.producer import dead_letters as dlq
from calsync.core.producer.submit import MESSAGE_KEY_PREFIX
from calsync.core.store import intake_requests
from tests.conftest import POSTGRES_DSN
from tests.integration.intake_support import intake_pipeline, send_raw, wait_intake_letter, wait_synced
from tests.support import Pipeline, change, wait_until

pytestmark = [pytest.mark.integration]
__all__ = ["intake_pipeline"]


def _events_of(pipeline: Pipeline, tenant: str = "tenant-1") -> list[tuple[str, int]]:
    with pipeline.clients.db.read() as conn:
        rows = conn.execute(text("SELECT id, version FROM events WHERE tenant_id = :t ORDER BY id"), {"t": tenant})
        return [(row[0], row[1]) for row in rows]


@pytest.mark.both_brokers
def test_a_change_sent_as_a_message_is_saved_and_synced(intake_pipeline: Pipeline) -> None:
    pipeline = intake_pipeline
    account = pipeline.account()
    intake = IntakeMessage.model_validate(
        {"tenant_id": "tenant-1", "change": change([account], entity_id="evt-msg", title="By message"),
         "request_id": "req-1", "trace_id": "trace-intake-1"}
    )  # fmt: skip
    pipeline.broker.enqueue(intake_message(pipeline.settings.intake_queue, intake))
    with pipeline.worker(threads=2):
        row = wait_synced(pipeline, "evt-msg", account)
    assert row.synced_version == 1
    [stored] = pipeline.provider.events(account)
    assert stored.body["title"] == "By message"
    with pipeline.clients.db.read() as conn:
        first = intake_requests.find(conn, "tenant-1", "req-1")
    assert first is not None and first.receipt is not None and first.receipt["entity_id"] == "evt-msg"


def test_a_message_delivered_twice_creates_one_event(intake_pipeline: Pipeline) -> None:
    pipeline = intake_pipeline
    account = pipeline.account()
    intake = IntakeMessage.model_validate({"tenant_id": "tenant-1", "change": change([account], title="Once")})
    message = intake_message(pipeline.settings.intake_queue, intake)
    pipeline.broker.enqueue(message)
    pipeline.broker.enqueue(message)  # a redelivery: same message id (e.g. a worker killed after the commit)
    with pipeline.worker(threads=2):
        wait_until(lambda: pipeline.outcomes().get("success", 0) >= 3, what="both intake deliveries and the sync")
        pipeline.wait_idle()
    [(_, version)] = _events_of(pipeline)
    assert version == 1 and len(pipeline.provider.events(account)) == 1
    with pipeline.clients.db.read() as conn:
        assert intake_requests.find(conn, "tenant-1", MESSAGE_KEY_PREFIX + message.message_id) is not None


def test_a_resent_request_id_changes_nothing_and_another_change_under_it_is_dead_lettered(
    intake_pipeline: Pipeline,
) -> None:
    pipeline = intake_pipeline
    account = pipeline.account()
    first = {"tenant_id": "tenant-1", "change": change([account], entity_id="evt-r", title="A"), "request_id": "r-9"}
    send_raw(pipeline, first)
    send_raw(pipeline, first)
    other = send_raw(pipeline, {**first, "change": change([account], entity_id="evt-r", title="B")})
    with pipeline.worker(threads=1):
        letter = wait_intake_letter(pipeline, other.message_id)
        wait_synced(pipeline, "evt-r", account)
    assert _events_of(pipeline) == [("evt-r", 1)]
    assert (letter.reason, letter.error_class) == ("idempotency key reused", "IdempotencyKeyReused")
    assert pipeline.provider.events(account)[0].body["title"] == "A"


@pytest.mark.parametrize(
    ("argument", "reason", "error_class", "says"),
    [
        ({"tenant_id": "tenant-1", "change": {"operation": "upsert"}}, "invalid change", "InvalidChange",
         "change: event is required"),
        ({"tenant_id": "tenant-1", "change": {"operation": "delete", "entity_id": "evt-none"}},
         "entity not found", "EntityNotFound", "evt-none"),
        ({"tenant_id": "tenant-1", "change": change(["acc-missing"])}, "invalid change", "InvalidChange",
         "acc-missing"),
        ({"tenant_id": "bad tenant", "change": change(["acc"])}, "invalid payload", "InvalidPayload", "tenant_id"),
        ({"change": change(["acc"])}, "invalid payload", "InvalidPayload", "tenant_id: is required"),
        ("not an object", "invalid payload", "InvalidPayload", "exactly one positional argument"),
    ],
)  # fmt: skip
def test_a_bad_message_is_dead_lettered_with_its_reason_and_nothing_saved(
    intake_pipeline: Pipeline, argument: Any, reason: str, error_class: str, says: str
) -> None:
    pipeline = intake_pipeline
    message = send_raw(pipeline, argument)
    with pipeline.worker(threads=1):
        letter = wait_intake_letter(pipeline, message.message_id)
    assert (letter.job_type, letter.reason, letter.error_class) == (INTAKE_JOB, reason, error_class)
    assert says in letter.last_error and letter.attempts == 1
    assert letter.payload == argument and letter.queue == pipeline.settings.intake_queue
    if isinstance(argument, dict) and argument.get("tenant_id") == "tenant-1":
        assert letter.tenant_id == "tenant-1"
    assert _events_of(pipeline) == []


@pytest.mark.both_brokers
def test_an_intake_dead_letter_is_replayed_once_its_cause_is_fixed(intake_pipeline: Pipeline) -> None:
    pipeline = intake_pipeline
    argument = {"tenant_id": "tenant-1", "change": change(["acc-late"], entity_id="evt-late"), "trace_id": "t-late"}
    message = send_raw(pipeline, argument)
    with pipeline.worker(threads=1):
        letter = wait_intake_letter(pipeline, message.message_id)
        assert letter.trace_id == "t-late"
        pipeline.account(account_id="acc-late")  # the operator fixes the cause
        report = dlq.replay(pipeline.clients, [letter])
        assert report.replayed == [ReplayedOut(id=letter.id, job_id=message.message_id)]
        wait_synced(pipeline, "evt-late", "acc-late")
    assert pipeline.dead_letters(job_type=INTAKE_JOB) == []
    assert _events_of(pipeline) == [("evt-late", 1)]


def _schema_of(database_url: str) -> str:
    options = urllib.parse.parse_qs(urllib.parse.urlsplit(database_url).query)["options"][0]
    return options.removeprefix("-csearch_path=")


@pytest.mark.postgresql_only
def test_a_database_failure_is_retried_on_the_schedule(intake_pipeline: Pipeline) -> None:
    pipeline = intake_pipeline
    account = pipeline.account()
    schema = _schema_of(pipeline.settings.effective_database_url)
    send_raw(pipeline, {"tenant_id": "tenant-1", "change": change([account], entity_id="evt-db")})
    with psycopg.connect(POSTGRES_DSN, autocommit=True) as admin:
        admin.execute(f"ALTER SCHEMA {schema} RENAME TO {schema}_away")  # every table is gone for the worker
        try:
            with pipeline.worker(threads=1):
                wait_until(lambda: pipeline.outcomes().get("retry_scheduled", 0) >= 1, what="a scheduled retry")
                admin.execute(f"ALTER SCHEMA {schema}_away RENAME TO {schema}")
                wait_synced(pipeline, "evt-db", account)
        finally:
            admin.execute(
                f"DO $$ BEGIN IF EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = '{schema}_away') THEN "
                f"ALTER SCHEMA {schema}_away RENAME TO {schema}; END IF; END $$"
            )
    assert pipeline.dead_letters(job_type=INTAKE_JOB) == []

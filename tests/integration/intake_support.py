"""Shared by the intake tests: a pipeline whose intake queue is private to the test, raw intake messages."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import dramatiq
import pytest

from calsync.core.model.intake import INTAKE_JOB
from calsync.core.store import targets
from calsync.core.store.dead_letters import DeadLetter
from calsync.core.store.targets import TargetKey, TargetRow
from tests.conftest import RABBITMQ_URL
from tests.support import Pipeline, wait_until


@pytest.fixture
def intake_pipeline(settings_factory: Any, broker_kind: str) -> Iterator[Pipeline]:
    """A pipeline with real worker threads on both queues; on RabbitMQ the intake queue is the test's own."""
    intake_queue = f"in{uuid.uuid4().hex[:8]}" if broker_kind == "rabbitmq" else "intake"
    built = Pipeline(settings_factory(intake_queue=intake_queue, retry_schedule=(0.5, 0.5, 0.5, 0.5, 0.5)))
    yield built
    built.close()
    if broker_kind == "rabbitmq":
        import pika

        connection = pika.BlockingConnection(pika.URLParameters(RABBITMQ_URL))
        channel = connection.channel()
        for name in (intake_queue, f"{intake_queue}.DQ", f"{intake_queue}.XQ"):
            channel.queue_delete(name)
        connection.close()


def send_raw(pipeline: Pipeline, argument: Any, **options: Any) -> dramatiq.Message[Any]:
    """Enqueue a ``submit_change`` message whose argument is whatever the test gives (valid or not)."""
    message: dramatiq.Message[Any] = dramatiq.Message(
        queue_name=pipeline.settings.intake_queue, actor_name=INTAKE_JOB, args=(argument,), kwargs={},
        options=options,
    )  # fmt: skip
    return pipeline.broker.enqueue(message)


def wait_intake_letter(pipeline: Pipeline, message_id: str) -> DeadLetter:
    """The DLQ record of one intake message, once the worker wrote it."""

    def found() -> DeadLetter | None:
        letters = [d for d in pipeline.dead_letters(job_type=INTAKE_JOB) if d.message_id == message_id]
        return letters[0] if letters else None

    letter = wait_until(found, what=f"intake message {message_id} to be dead-lettered")
    assert letter is not None
    return letter


def wait_synced(pipeline: Pipeline, entity_id: str, account_id: str, tenant: str = "tenant-1") -> TargetRow:
    """Wait until a target that an intake message will create exists and is synced."""

    def synced() -> TargetRow | None:
        with pipeline.clients.db.read() as conn:
            row = targets.get_target(conn, TargetKey(tenant, entity_id, account_id))
        return row if row is not None and row.status == "synced" else None

    row = wait_until(synced, what=f"target {entity_id}/{account_id} to be created and synced")
    assert row is not None
    return row

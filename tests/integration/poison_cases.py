"""The poison kinds of issue 12, as raw bodies another service could put on our queues.

``RawProducer`` puts bytes on a pipeline's queues the way another service would. Each case builds its
body from the id the broker queues it under (Redis repeats it in ``options.redis_message_id``) and says
where the message must end: quarantined (with the refusal) or dead-lettered as a job (with the reason).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pika

from calsync.core.messaging.messages import RECONCILE_JOB
from calsync.core.model.payload import SYNC_JOB, new_payload
from calsync.core.model.vocabulary import DeadLetterCause, Refusal
from tests.conftest import RABBITMQ_URL
from tests.support import Pipeline

Body = Callable[[str], bytes]


@dataclass(frozen=True)
class Case:
    """One poison message: its body, the list it is pushed on, and where it must end."""

    name: str
    body: Body
    ends: str  # "quarantined: <refusal>" or a job dead letter's reason
    on: str = "main"  # "main" | "delay" (the delay queue) | "orphan" (an id without a body; Redis only)
    brokers: tuple[str, ...] = ("redis", "rabbitmq")
    job_id: str | None = None  # the dead letter's job id, for job dead letters
    overrides: dict[str, Any] = field(default_factory=dict)


class RawProducer:
    """Puts bytes on the pipeline's queues without Dramatiq."""

    def __init__(self, pipeline: Pipeline, broker_kind: str) -> None:
        self.kind = broker_kind
        self.queue = pipeline.settings.queue
        self.ns = pipeline.settings.redis_namespace
        self.redis = pipeline.clients.redis
        if broker_kind == "rabbitmq":
            pipeline.broker.declare_queue(self.queue, ensure=True)  # type: ignore[call-arg]
            self.connection = pika.BlockingConnection(pika.URLParameters(RABBITMQ_URL))
            self.channel = self.connection.channel()

    def push(self, case: Case) -> bytes:
        """Queue the case's body; returns the bytes queued."""
        return self.push_body(case.body, on=case.on)

    def push_body(self, build: Body, *, on: str = "main") -> bytes:
        """Queue the body ``build`` makes of the queued id, on the main list, the delay list, or as a bare id."""
        rid = str(uuid.uuid4())
        body = build(rid)
        queue = f"{self.queue}.DQ" if on == "delay" else self.queue
        if self.kind == "rabbitmq":
            properties = pika.BasicProperties(delivery_mode=2)
            self.channel.basic_publish(exchange="", routing_key=queue, body=body, properties=properties)
            return body
        with self.redis.pipeline(transaction=True) as tx:
            if on != "orphan":
                tx.hset(f"{self.ns}:{queue}.msgs", rid, body)
            tx.rpush(f"{self.ns}:{queue}", rid)
            tx.execute()
        return body

    def held(self, broker_id: str) -> dict[str, int]:
        """What the broker still holds of the queue: ready, in flight, and dead-lettered by Dramatiq."""
        q, ns = self.queue, self.ns
        if self.kind == "rabbitmq":
            counts = {name: self.channel.queue_declare(name, passive=True).method.message_count
                      for name in (q, f"{q}.DQ", f"{q}.XQ")}  # fmt: skip
            return {"ready": counts[q] + counts[f"{q}.DQ"], "xq": counts[f"{q}.XQ"]}
        r = self.redis
        return {
            "ready": r.llen(f"{ns}:{q}") + r.llen(f"{ns}:{q}.DQ"),
            "bodies": r.hlen(f"{ns}:{q}.msgs") + r.hlen(f"{ns}:{q}.DQ.msgs"),
            "in_flight": r.scard(f"{ns}:__acks__.{broker_id}.{q}") + r.scard(f"{ns}:__acks__.{broker_id}.{q}.DQ"),
            "xq": r.zcard(f"{ns}:{q}.XQ"),
        }

    def close(self) -> None:
        """Drop the AMQP connection."""
        if self.kind == "rabbitmq":
            self.connection.close()


def quarantined(refusal: Refusal) -> str:
    """The DLQ reason of a quarantined message."""
    return DeadLetterCause.QUARANTINED.reason(_Refused(refusal))


class _Refused(Exception):
    def __init__(self, refusal: Refusal) -> None:
        super().__init__(refusal.value)
        self.refusal = refusal.value


def envelope(
    queue: str, rid: str, *, actor: str = SYNC_JOB, args: list[Any] | None = None, **over: Any
) -> dict[str, Any]:
    """A Dramatiq envelope as the wire contract describes it."""
    doc: dict[str, Any] = {
        "queue_name": queue,
        "actor_name": actor,
        "args": [] if args is None else args,
        "kwargs": {},
        "options": {"redis_message_id": rid},
        "message_id": str(uuid.uuid4()),
        "message_timestamp": int(time.time() * 1000),
    }
    doc.update(over)
    return doc


def payload(
    job_id: str, *, tenant: str = "tenant-1", entity: str = "evt-none", account: str = "acc-none", **over: Any
) -> dict[str, Any]:
    """A sync payload (valid unless ``over`` breaks it)."""
    doc = new_payload(
        tenant_id=tenant,
        entity_id=entity,
        account_id=account,
        operation="update",
        version=1,
        trace_id=f"trace-{job_id}",
    ).to_message_arg()
    doc["job_id"] = job_id
    doc.update(over)
    return doc


def _encoded(doc: Any) -> bytes:
    return json.dumps(doc).encode()


def poison_cases(queue: str, *, real_entity: str, real_account: str) -> list[Case]:
    """Every kind the issue lists, and a few more."""
    cases: list[Case] = []

    def job(name: str, ends: str, **over: Any) -> None:
        job_id = f"job-{name}"
        cases.append(
            Case(name, lambda rid: _encoded(envelope(queue, rid, args=[payload(job_id, **over)])), ends, job_id=job_id)
        )

    def job_with(name: str, ends: str, build: Callable[[str], dict[str, Any]], **kw: Any) -> None:
        cases.append(Case(name, lambda rid: _encoded(build(rid)), ends, job_id=f"job-{name}", **kw))

    def refused(name: str, refusal: Refusal, body: Body, **kw: Any) -> None:
        cases.append(Case(name, body, quarantined(refusal), **kw))

    invalid, missing = "invalid payload", "entity not found"
    without_entity = {k: v for k, v in payload("job-missing-field").items() if k != "entity_id"}
    job_with("missing-field", invalid, lambda rid: envelope(queue, rid, args=[without_entity]))
    job("wrong-type", invalid, entity_id=["e"])
    job("huge-string", invalid, trace_id="x" * 200_000)
    job("version-negative", invalid, target_version=-1)
    job("version-zero", invalid, target_version=0)
    job("version-2-31", invalid, target_version=2**31)
    job("version-float", invalid, target_version=1.5)
    job("version-string", invalid, target_version="3")
    job("unknown-operation", invalid, operation="merge")
    job("extra-field", invalid, colour="red")
    job("mismatched-key", invalid, idempotency_key="calendar:other:e:a:update:v1")
    job("bad-ids", invalid, tenant_id="a:b", entity_id="")
    job("bad-attempt", invalid, attempt=10**12)
    job("bad-time", invalid, scheduled_at="yesterday")
    job("naive-time", invalid, scheduled_at="2026-12-01T09:00:00")
    job("wrong-job-type", invalid, job_type="send_invoice")
    nobody_key = "calendar:tenant-nobody:evt-none:acc-none:update:v1"
    job("unknown-tenant", missing, tenant="tenant-nobody", idempotency_key=nobody_key)
    job(
        "unknown-account",
        missing,
        entity=real_entity,
        account="acc-nobody",
        idempotency_key=f"calendar:tenant-1:{real_entity}:acc-nobody:update:v1",
    )
    job(
        "real-entity-huge-version",
        invalid,
        entity=real_entity,
        account=real_account,
        target_version=2**40,
        idempotency_key=f"calendar:tenant-1:{real_entity}:{real_account}:update:v{2**40}",
    )
    job_with("payload-not-object", invalid, lambda rid: envelope(queue, rid, args=["job-payload-not-object"]))
    job_with("args-two", invalid, lambda rid: envelope(queue, rid, args=[payload("job-args-two"), {}]))
    job_with(
        "args-kwargs", invalid, lambda rid: envelope(queue, rid, args=[payload("job-args-kwargs")], kwargs={"x": 1})
    )
    # Redis needs the queued id in the envelope; RabbitMQ does not look at it, so there the job runs and fails.
    no_rid = {"options": {}}
    refused(
        "missing-redis-message-id",
        Refusal.BROKER_ID,
        lambda rid: _encoded(envelope(queue, rid, args=[payload("job-no-rid")], **no_rid)),
        brokers=("redis",),
    )
    job_with(
        "missing-redis-message-id-amqp",
        missing,
        lambda rid: envelope(queue, rid, args=[payload("job-missing-redis-message-id-amqp")], **no_rid),
        brokers=("rabbitmq",),
    )
    refused(
        "wrong-redis-message-id",
        Refusal.BROKER_ID,
        lambda rid: _encoded(envelope(queue, "another-id", args=[payload("job-x")])),
        brokers=("redis",),
    )

    refused("non-utf8", Refusal.NOT_UTF8, lambda rid: b'{"queue_name": "\xff\xfe"}')
    refused("non-json", Refusal.NOT_JSON, lambda rid: b"sync_calendar_event(evt-1)")
    refused("json-nan", Refusal.NOT_JSON, lambda rid: _encoded(envelope(queue, rid))[:-1] + b', "x": NaN}')
    refused("json-array", Refusal.NOT_ENVELOPE, lambda rid: b"[1, 2, 3]")
    refused("json-string", Refusal.NOT_ENVELOPE, lambda rid: b'"sync me"')
    refused("json-object", Refusal.NOT_ENVELOPE, lambda rid: b'{"event": "evt-1"}')
    refused("empty-body", Refusal.NOT_JSON, lambda rid: b"")
    refused("huge-body", Refusal.TOO_LARGE, lambda rid: b"x" * (2 * 1024 * 1024))
    for gone in ("args", "options", "message_id", "message_timestamp", "queue_name"):
        refused(
            f"envelope-without-{gone}",
            Refusal.NOT_ENVELOPE,
            lambda rid, gone=gone: _encoded({k: v for k, v in envelope(queue, rid).items() if k != gone}),
        )
    refused("envelope-extra-field", Refusal.NOT_ENVELOPE, lambda rid: _encoded(envelope(queue, rid, colour="red")))
    refused("envelope-args-object", Refusal.NOT_ENVELOPE, lambda rid: _encoded(envelope(queue, rid, args={"a": 1})))
    refused(
        "envelope-timestamp-string",
        Refusal.NOT_ENVELOPE,
        lambda rid: _encoded(envelope(queue, rid, message_timestamp="now")),
    )
    for name in ("other", "", f"{queue}.XQ"):
        refused(
            f"queue-name-{name or 'empty'}",
            Refusal.WRONG_QUEUE,
            lambda rid, name=name: _encoded(envelope(queue, rid, queue_name=name, args=[payload("job-q")])),
        )
    refused(
        "pushed-on-the-delay-list",
        Refusal.WRONG_QUEUE,
        lambda rid: _encoded(envelope(queue, rid, args=[payload("job-dq")])),
        on="delay",
    )
    refused("unknown-actor", Refusal.UNKNOWN_ACTOR, lambda rid: _encoded(envelope(queue, rid, actor="send_invoice")))
    refused(
        "reconcile-with-args",
        Refusal.BAD_ARGUMENTS,
        lambda rid: _encoded(envelope(queue, rid, actor=RECONCILE_JOB, args=[1, 2])),
    )
    refused(
        "option-throws",
        Refusal.BAD_OPTION,
        lambda rid: _encoded(
            envelope(
                queue, rid, args=[payload("job-throws")], options={"redis_message_id": rid, "throws": "ValueError"}
            )
        ),
    )
    refused(
        "option-eta",
        Refusal.BAD_OPTION,
        lambda rid: _encoded(
            envelope(queue, rid, args=[payload("job-eta")], options={"redis_message_id": rid, "eta": "soon"})
        ),
    )
    refused(
        "option-retries",
        Refusal.BAD_OPTION,
        lambda rid: _encoded(
            envelope(queue, rid, args=[payload("job-retries")], options={"redis_message_id": rid, "retries": "many"})
        ),
    )
    refused(
        "option-time-limit",
        Refusal.BAD_OPTION,
        lambda rid: _encoded(
            envelope(queue, rid, args=[payload("job-tl")], options={"redis_message_id": rid, "time_limit": "long"})
        ),
    )
    refused("id-without-body", Refusal.NO_BODY, lambda rid: b"", on="orphan", brokers=("redis",))
    return cases

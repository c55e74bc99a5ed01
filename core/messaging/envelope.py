"""The envelope check: what a delivery must be before a worker thread may see it.

Dramatiq trusts what it reads off a queue: a body that does not decode crashes the consumer thread
(stranding the messages it had prefetched), a ``queue_name`` other than the consumer's kills the worker
thread that ran it (``WorkerThread.process_message`` acks through ``consumers[message.queue_name]``), a
missing ``redis_message_id`` makes the ack fail forever, and a ``throws`` option that is not a class
makes the worker thread's exception handler raise. :func:`read_message` admits only messages none of
that can happen to; everything else is refused with a :class:`~core.model.vocabulary.Refusal`
(docs/notes/dramatiq.md §poison).
"""

from __future__ import annotations

import functools
import inspect
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Final

import dramatiq
from dramatiq.common import q_name
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from calsync.core.model.payload import SYNC_JOB
from calsync.core.model.validation_wording import describe_validation_error
from calsync.core.model.vocabulary import Refusal

MAX_DELAY_MS: Final = 7 * 86_400_000  # Dramatiq's own bound on a delay
MESSAGE_ID_LIMIT: Final = 64  # the DLQ's message_id column
NAME_LIMIT: Final = 128
_ACTOR_ONLY: Final = ("throws", "retry_when")  # callables/classes: a message cannot carry them
_Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)] | None


class _Envelope(BaseModel):
    """Dramatiq's envelope: every field present, each of its JSON type (``strict``: no ``true`` for a number)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    queue_name: str
    actor_name: str
    args: list[Any]
    kwargs: dict[str, Any]
    options: dict[str, Any]
    message_id: str = Field(min_length=1, max_length=MESSAGE_ID_LIMIT)
    message_timestamp: int = Field(ge=0, le=2**53)


class _Options(BaseModel):
    """The options Dramatiq reads from a message, each of the type the hook reading it needs (others pass)."""

    model_config = ConfigDict(extra="allow", strict=True)

    eta: Annotated[float, Field(allow_inf_nan=False)] | None = None
    time_limit: _Positive = None
    max_retries: _Positive = None
    min_backoff: _Positive = None
    max_backoff: _Positive = None
    max_age: _Positive = None
    retries: int | None = Field(default=None, ge=0, le=2**31 - 1)
    broker_priority: int | None = Field(default=None, ge=0, le=255)
    notify_shutdown: bool = False


@dataclass(frozen=True)
class Refused:
    """A delivery that must not run: why, in words, and what could be decoded of it (for the record)."""

    refusal: Refusal
    detail: str
    document: Any = None


def _no_constants(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def _option_problem(options: dict[str, Any], broker_message_id: str | None) -> tuple[Refusal, str] | None:
    if broker_message_id is not None and options.get("redis_message_id") != broker_message_id:
        return Refusal.BROKER_ID, f"options.redis_message_id must equal the queued id {broker_message_id!r}"
    for name in _ACTOR_ONLY:
        if name in options:
            return Refusal.BAD_OPTION, f"option {name} can only be set on the actor"
    try:
        eta = _Options.model_validate(options).eta
    except ValidationError as exc:
        return Refusal.BAD_OPTION, f"options: {describe_validation_error(exc)}"
    if eta is not None and eta > time.time() * 1000 + MAX_DELAY_MS:
        return Refusal.BAD_OPTION, "option eta must be epoch milliseconds at most 7 days ahead"
    return None


@functools.lru_cache(maxsize=256)
def _signature(fn: Any) -> inspect.Signature:
    return inspect.signature(fn)  # once per actor function, not per message


def _consumes(actor: dramatiq.Actor[Any, Any], queue: str, overflow: Mapping[str, str]) -> bool:
    # The sync actor runs from its own queue and from that queue's bulk lane; every other actor from its own.
    return actor.queue_name == queue or (actor.actor_name == SYNC_JOB and overflow.get(queue) == actor.queue_name)


def read_message(
    body: bytes | None,
    *,
    broker: dramatiq.Broker,
    queue_name: str,
    broker_message_id: str | None,
    max_bytes: int,
    overflow: Mapping[str, str] | None = None,
) -> dramatiq.Message[Any] | Refused:
    """The message in ``body`` if a worker may run it from ``queue_name``; else why not.

    ``broker_message_id`` is the id the broker queued the body under, when the envelope must repeat it
    (Redis: ``options.redis_message_id``). ``overflow`` maps a bulk lane to the queue whose sync actor
    it also carries (core/messaging/lanes.py).
    """
    if body is None:
        return Refused(Refusal.NO_BODY, f"queued id {broker_message_id!r} has no body in the messages hash")
    if len(body) > max_bytes:
        return Refused(Refusal.TOO_LARGE, f"{len(body)} bytes, more than the limit of {max_bytes}")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Refused(Refusal.NOT_UTF8, f"byte {exc.start}: {exc.reason}")
    try:
        doc = json.loads(text, parse_constant=_no_constants)
    except ValueError as exc:
        return Refused(Refusal.NOT_JSON, str(exc)[:300])
    try:
        _Envelope.model_validate(doc)
    except ValidationError as exc:
        return Refused(Refusal.NOT_ENVELOPE, describe_validation_error(exc), doc)
    if doc["queue_name"] != queue_name:
        said = doc["queue_name"][:NAME_LIMIT]
        return Refused(Refusal.WRONG_QUEUE, f"queue_name {said!r} on queue {queue_name!r}", doc)
    actor = broker.actors.get(doc["actor_name"])
    if actor is None:
        return Refused(Refusal.UNKNOWN_ACTOR, f"no actor named {doc['actor_name'][:NAME_LIMIT]!r}", doc)
    if not _consumes(actor, q_name(queue_name), overflow or {}):
        detail = f"actor {actor.actor_name} consumes {actor.queue_name!r}, not {queue_name!r}"
        return Refused(Refusal.WRONG_QUEUE, detail, doc)
    option = _option_problem(doc["options"], broker_message_id)
    if option is not None:
        return Refused(option[0], option[1], doc)
    try:
        _signature(actor.fn).bind(*doc["args"], **doc["kwargs"])
    except TypeError as exc:
        return Refused(Refusal.BAD_ARGUMENTS, f"actor {actor.actor_name}: {exc}", doc)
    return dramatiq.Message(**doc | {"args": tuple(doc["args"])})  # the envelope's fields, exactly (extra="forbid")

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
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import dramatiq
from dramatiq.common import q_name

from calsync.core.model.payload import SYNC_JOB
from calsync.core.model.vocabulary import Refusal

MAX_DELAY_MS: Final = 7 * 86_400_000  # Dramatiq's own bound on a delay
MESSAGE_ID_LIMIT: Final = 64  # the DLQ's message_id column
NAME_LIMIT: Final = 128
_INT_MAX: Final = 2**31 - 1
_ENVELOPE: Final[dict[str, type]] = {
    "queue_name": str,
    "actor_name": str,
    "args": list,
    "kwargs": dict,
    "options": dict,
    "message_id": str,
    "message_timestamp": int,
}
# Options Dramatiq reads from a message (a JSON value of the wrong type breaks the hook reading it).
_POSITIVE_NUMBERS: Final = ("time_limit", "max_retries", "min_backoff", "max_backoff", "max_age")
_ACTOR_ONLY: Final = ("throws", "retry_when")  # callables/classes: a message cannot carry them


@dataclass(frozen=True)
class Refused:
    """A delivery that must not run: why, in words, and what could be decoded of it (for the record)."""

    refusal: Refusal
    detail: str
    document: Any = None


def _no_constants(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return (_is_int(value) or isinstance(value, float)) and math.isfinite(value)


def _envelope_problem(doc: Any) -> str | None:
    if not isinstance(doc, dict):
        return f"the body is a JSON {type(doc).__name__}, not an object"
    if doc.keys() != _ENVELOPE.keys():
        missing, extra = sorted(set(_ENVELOPE) - set(doc)), sorted(set(doc) - set(_ENVELOPE))
        return f"missing fields {missing}, unexpected fields {extra}"
    for name, kind in _ENVELOPE.items():
        value = doc[name]
        if not isinstance(value, kind) or isinstance(value, bool):
            return f"{name} must be a JSON {kind.__name__}, got {type(value).__name__}"
    if not 0 < len(doc["message_id"]) <= MESSAGE_ID_LIMIT:
        return f"message_id must have 1 to {MESSAGE_ID_LIMIT} characters"
    if not 0 <= doc["message_timestamp"] <= 2**53:
        return "message_timestamp is out of range"
    return None


def _option_problem(options: dict[str, Any], broker_message_id: str | None) -> tuple[Refusal, str] | None:
    if broker_message_id is not None and options.get("redis_message_id") != broker_message_id:
        return Refusal.BROKER_ID, f"options.redis_message_id must equal the queued id {broker_message_id!r}"
    for name in _ACTOR_ONLY:
        if name in options:
            return Refusal.BAD_OPTION, f"option {name} can only be set on the actor"
    eta = options.get("eta")
    if eta is not None and not (_is_number(eta) and eta <= time.time() * 1000 + MAX_DELAY_MS):
        return Refusal.BAD_OPTION, "option eta must be epoch milliseconds at most 7 days ahead"
    for name in _POSITIVE_NUMBERS:
        value = options.get(name)
        if value is not None and not (_is_number(value) and value > 0):
            return Refusal.BAD_OPTION, f"option {name} must be a positive number"
    retries = options.get("retries")
    if retries is not None and not (_is_int(retries) and 0 <= retries <= _INT_MAX):
        return Refusal.BAD_OPTION, "option retries must be a non-negative integer"
    priority = options.get("broker_priority")
    if priority is not None and not (_is_int(priority) and 0 <= priority <= 255):
        return Refusal.BAD_OPTION, "option broker_priority must be an integer 0..255"
    if not isinstance(options.get("notify_shutdown", False), bool):
        return Refusal.BAD_OPTION, "option notify_shutdown must be a boolean"
    return None


@functools.lru_cache(maxsize=256)
def _signature(fn: Any) -> inspect.Signature:
    return inspect.signature(fn)  # once per actor function, not per message


def _arguments_problem(actor: dramatiq.Actor[Any, Any], args: list[Any], kwargs: dict[str, Any]) -> str | None:
    try:
        _signature(actor.fn).bind(*args, **kwargs)
    except TypeError as exc:
        return f"actor {actor.actor_name}: {exc}"
    return None


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
    problem = _envelope_problem(doc)
    if problem is not None:
        return Refused(Refusal.NOT_ENVELOPE, problem, doc)
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
    arguments = _arguments_problem(actor, doc["args"], doc["kwargs"])
    if arguments is not None:
        return Refused(Refusal.BAD_ARGUMENTS, arguments, doc)
    return dramatiq.Message(
        queue_name=doc["queue_name"],
        actor_name=doc["actor_name"],
        args=tuple(doc["args"]),
        kwargs=doc["kwargs"],
        options=doc["options"],
        message_id=doc["message_id"],
        message_timestamp=doc["message_timestamp"],
    )

"""What other services call inside their request: validate, save the intent, enqueue, return at once.

``submit_change`` commits the new event version with every affected target ``pending`` in one
transaction, and only then enqueues one ``sync_calendar_event`` job per target. If the enqueue fails
after the commit nothing is lost: the targets stay pending and ``calsync reconcile`` re-enqueues them.
A dedup marker per (target, operation, version) suppresses identical enqueues within ``DEDUP_TTL``;
a coalesce marker per target delays the jobs of a burst's later edits by ``COALESCE_WINDOW``, so a burst
writes its first and its newest version only; both are optimisations, never the source of truth.
Submitting a change identical to the current state creates no new version: a client retrying its
request gets the same entity and version, with the first job ids of the targets still pending (none
once all synced).

Concurrent changes of one event take turns: the intent's transaction locks the event's row, and a
concurrent create of the same new ``entity_id`` waits for the first one's commit and then applies to
the event it created. Each change is decided against the version committed before it, as if sent one
after the other: an identical one creates no version and gets the first one's jobs, a different one
the next version.

The ``submit_change`` actor (:func:`intake_actor`) does the same in a worker for an intake message. It is
idempotent per request: the message's ``request_id`` when it has one, else its Dramatiq ``message_id`` (kept
across retries and redeliveries), so a message delivered twice (a worker killed after the commit) creates
one version, not two events. A bad change raises :class:`~core.model.errors.InvalidChange` (or
EntityNotFound, IdempotencyKeyReused, …): a PermanentError, dead-lettered at once with its reason;
anything else (the database down) is retried on the schedule like any job.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass
from typing import Any, Final

from pydantic import BaseModel, ValidationError
from sqlalchemy import Connection

from calsync.core.clients import Clients, default_clients
from calsync.core.messaging.lanes import lanes_of
from calsync.core.messaging.messages import sync_message
from calsync.core.model.calendar import SendUpdates
from calsync.core.model.change import Change, parse_change
from calsync.core.model.errors import EntityNotFound, InvalidChange
from calsync.core.model.ids import check_identifier, new_id, new_trace_id
from calsync.core.model.intake import IntakeMessage, RequestId, TraceId, parse_intake
from calsync.core.model.payload import JobPayload
from calsync.core.model.planner import plan
from calsync.core.model.validation_wording import describe_validation_error
from calsync.core.model.vocabulary import Lane
from calsync.core.producer.dedup import Claim, EnqueueMarkers, Mark, RedisMarkers
from calsync.core.producer.fairness import TenantLanes, lane_choice
from calsync.core.producer.receipts import Receipt, body_hash, first_receipt, store_receipt
from calsync.core.store import accounts, events, intake_requests, targets
from calsync.core.store.database import Database
from calsync.core.store.targets import TargetKey, TargetRow

log = logging.getLogger(__name__)


Enqueue = Callable[[JobPayload, Lane, int | None], object]  # enqueues a job on its lane, a delay in ms later (None:
# at once); raises when the broker refuses it
Saved = tuple[str, int, list[JobPayload]]  # an intent as committed: the event's id, its version, its new jobs
Planned = list[tuple[TargetKey, targets.Wanted]]  # targets to mark pending, each with whether it must show the event


class _KeyTaken(Exception):
    """Rolls back an intent whose request key a concurrent request claimed first."""


def _planned_jobs(
    conn: Connection, planned: Planned, rows: dict[str, TargetRow], version: int, trace: str, *, cancelled: bool = False
) -> list[JobPayload]:
    """Mark the ``planned`` targets pending at ``version``, due now, by the job of each (returned); ``rows`` are the
    event's stored targets (what each one shows now)."""
    existing = {row.key for row in rows.values()}
    jobs = [plan(rows.get(key.account_id), key, version=version, wanted_present=wanted == "present",
                 cancelled=cancelled, trace_id=trace) for key, wanted in planned]  # fmt: skip
    job_ids = {key: job.job_id for (key, _), job in zip(planned, jobs, strict=True)}
    targets.plan_targets(conn, planned, version=version, due_at=dt.datetime.now(dt.UTC), existing=existing,
                         job_ids=job_ids)  # fmt: skip
    return jobs


def _gone(row: TargetRow) -> bool:
    """Whether a target is deleted and meant to stay so: no change plans it again."""
    return row.status == "deleted" and row.wanted == "absent"


class _CallerIds(BaseModel):
    """The caller's trace id and request key, stored and logged with the change: refused as the intake message's."""

    trace_id: TraceId | None
    request_id: RequestId | None


@dataclass
class Intake:
    """Accepts changes: saves the intent in the database, then enqueues one job per affected target."""

    db: Database
    markers: EnqueueMarkers
    enqueue_job: Enqueue
    _: KW_ONLY
    default_send_updates: SendUpdates
    request_key_ttl: int = 86400
    lanes: TenantLanes | None = None  # None: every job on the normal lane

    def submit(
        self,
        tenant_id: str,
        change: Change | dict[str, Any],
        *,
        trace_id: str | None = None,
        request_key: str | None = None,
    ) -> Receipt:
        """Validate and authorize, save the intent, then enqueue one job per affected target.

        With a ``request_key`` (an HTTP Idempotency-Key, an intake message's request id), a retry of the
        same change under the same key, concurrent or later, returns the first receipt and changes nothing
        (core/producer/receipts.py); another change under a live key raises :class:`IdempotencyKeyReused`.
        """
        tenant_id = check_identifier(tenant_id, "tenant_id")
        try:
            _CallerIds(trace_id=trace_id, request_id=request_key)
        except ValidationError as exc:
            raise InvalidChange(describe_validation_error(exc)) from None
        parsed = parse_change(change)
        trace = trace_id or new_trace_id()
        if request_key is None:
            with self.db.write() as conn:
                saved = self._save_intent(conn, tenant_id, parsed, trace)
            return self._enqueue(tenant_id, *saved, trace)
        digest = body_hash(parsed)
        while (saved_once := self._save_claiming(tenant_id, parsed, trace, request_key, digest)) is None:
            first = first_receipt(self.db, tenant_id, request_key, digest)  # waits while the key's owner enqueues
            if first is not None:
                return first
        receipt = self._enqueue(tenant_id, *saved_once, trace)
        return store_receipt(self.db, tenant_id, request_key, receipt)

    def _save_claiming(self, tenant_id: str, change: Change, trace: str, request_key: str, digest: str) -> Saved | None:
        """Save the intent and claim the request key in one transaction; None (nothing saved) when the key is taken."""
        try:
            with self.db.write() as conn:
                if intake_requests.find(conn, tenant_id, request_key) is not None:
                    return None
                entity_id, version, jobs = self._save_intent(conn, tenant_id, change, trace)
                if not intake_requests.claim(conn, tenant_id, request_key, body_hash=digest, entity_id=entity_id,
                                             version=version, ttl=self.request_key_ttl):  # fmt: skip
                    raise _KeyTaken  # a concurrent request claimed it and committed first: ours rolls back
        except _KeyTaken:
            return None
        return entity_id, version, jobs

    def _check_accounts(self, conn: Connection, tenant_id: str, account_ids: tuple[str, ...]) -> None:
        found = accounts.get_standings(conn, account_ids)  # one query, however many accounts
        known = {a: s for a, s in found.items() if s.tenant_id == tenant_id}
        missing = [a for a in account_ids if a not in known]
        if missing:
            listed = ", ".join(missing)
            raise InvalidChange(f"accounts: account {listed} does not exist for tenant {tenant_id}" if len(missing) == 1
                                else f"accounts: accounts {listed} do not exist for tenant {tenant_id}")  # fmt: skip
        for status, said in (("disabled", "disabled"), ("removing", "being removed")):
            refused = [a for a in account_ids if known[a].status == status]
            if refused:
                raise InvalidChange(f"accounts: account{'s' if len(refused) > 1 else ''} {', '.join(refused)} "
                                    f"{'are' if len(refused) > 1 else 'is'} {said}")  # fmt: skip

    def _save_intent(self, conn: Connection, tenant_id: str, change: Change, trace: str) -> Saved:
        send_updates = change.send_updates or self.default_send_updates
        if change.accounts is not None:
            self._check_accounts(conn, tenant_id, change.accounts)
        # Locked: concurrent changes of one event take turns, each decided against the version committed before it.
        existing = events.get_event(conn, tenant_id, change.entity_id, lock=True) if change.entity_id else None
        rows = {row.account_id: row for row in targets.list_targets(conn, tenant_id, existing.id)} if existing else {}

        if change.operation == "delete":
            if existing is None:
                raise EntityNotFound(f"entity_id: event {change.entity_id} does not exist for tenant {tenant_id}")
            if existing.status == "cancelled":
                return existing.id, existing.version, []
            version = events.bump_event(conn, tenant_id, existing.id, status="cancelled", send_updates=send_updates)
            live: Planned = [(row.key, row.wanted) for row in rows.values() if not _gone(row)]
            return existing.id, version, _planned_jobs(conn, live, rows, version, trace, cancelled=True)

        assert change.event is not None
        if existing is None:
            if change.accounts is None:
                raise InvalidChange("accounts: required when creating an event")
            entity_id = change.entity_id or new_id("evt")
            if not events.insert_event(conn, tenant_id, entity_id, change.event, send_updates):
                # A concurrent create of this entity_id came first: ours applies to the event it created.
                return self._save_intent(conn, tenant_id, change, trace)
            new: Planned = [(TargetKey(tenant_id, entity_id, account_id), "present") for account_id in change.accounts]
            return entity_id, 1, _planned_jobs(conn, new, {}, 1, trace)

        present_now = {a for a, row in rows.items() if row.wanted == "present"}
        wanted = list(change.accounts) if change.accounts is not None else sorted(present_now)
        unchanged = (
            existing.status == "confirmed"
            and existing.send_updates == send_updates
            and events.fields_of(existing) == change.event
            and set(wanted) == present_now
        )
        if unchanged:
            # Same request again: no new version. Pending targets are re-offered; the dedup markers of the
            # first submission (its create and our update share one: Mark.of) return its job ids.
            pending = [row for row in rows.values() if row.status == "pending"]
            jobs = [plan(row, row.key, version=existing.version, wanted_present=row.wanted == "present",
                         cancelled=False, trace_id=trace) for row in pending]  # fmt: skip
            return existing.id, existing.version, jobs

        version = events.bump_event(
            conn, tenant_id, existing.id, status="confirmed", send_updates=send_updates, fields=change.event
        )
        planned: Planned = [(TargetKey(tenant_id, existing.id, account_id), "present") for account_id in wanted]
        planned += [(row.key, "absent") for a, row in rows.items() if a not in wanted and not _gone(row)]
        return existing.id, version, _planned_jobs(conn, planned, rows, version, trace)

    def detach(
        self, tenant_id: str, entity_id: str, account_id: str, *, send_updates: SendUpdates | None = None
    ) -> Receipt:
        """Take an account out of an event's targets (``accounts remove --detach``), as a change leaving it out would:
        a new version whose job deletes the event from that account. The event's other targets are not written
        again (the version changes nothing they show); those still pending get a job of it, as after any edit.
        Nothing to do (no such target, already left out, event cancelled): no new version, no job."""
        trace = new_trace_id()
        with self.db.write() as conn:
            existing = events.get_event(conn, tenant_id, entity_id, lock=True)  # a concurrent change of the event waits
            rows = {row.account_id: row for row in targets.list_targets(conn, tenant_id, entity_id)}
            leaving = rows.get(account_id)
            if existing is None or existing.status == "cancelled" or leaving is None or leaving.wanted == "absent":
                return Receipt(entity_id, existing.version if existing else 0, [])
            version = events.bump_event(conn, tenant_id, entity_id, status="confirmed",
                                        send_updates=send_updates or self.default_send_updates)  # fmt: skip
            planned: Planned = [(leaving.key, "absent")]
            planned += [(r.key, r.wanted) for r in rows.values() if r.status == "pending" and r is not leaving]
            jobs = _planned_jobs(conn, planned, rows, version, trace)
        return self._enqueue(tenant_id, entity_id, version, jobs, trace)

    def _enqueue(self, tenant_id: str, entity_id: str, version: int, jobs: list[JobPayload], trace: str) -> Receipt:
        # Called after the intent is committed: the markers are claimed together (one script call), then the
        # new jobs are enqueued as one batch, later by the coalesce window when their target is coalescing.
        answers = self.markers.claim_all([Claim(Mark.of(job), job.job_id) for job in jobs])
        new = [n for n, claimed in enumerate(answers) if claimed.earlier is None]
        # A tenant over its rate: the bulk lane.
        lanes: list[Lane] = self.lanes.lanes(tenant_id, len(new)) if self.lanes else ["normal"] * len(new)
        sent = {n: self._sent(jobs[n], lane, answers[n].delay_ms) for n, lane in zip(new, lanes, strict=True)}
        failed = [jobs[n] for n in new if not sent[n]]
        if failed:
            self._defer(failed, entity_id, trace)
        job_ids = [claimed.earlier or jobs[n].job_id for n, claimed in enumerate(answers) if sent.get(n, True)]
        coalescing = sum(answers[n].delay_ms is not None for n in new if sent[n])
        log.info(
            "change accepted",
            extra={"fields": {"tenant_id": tenant_id, "entity_id": entity_id, "version": version, "trace_id": trace,
                              "jobs": len(job_ids), "deferred": len(failed), "coalescing": coalescing}},
        )  # fmt: skip
        return Receipt(entity_id, version, job_ids, [job.account_id for job in failed])

    def _sent(self, job: JobPayload, lane: Lane, delay_ms: int | None) -> bool:
        """One enqueue: whether it went out (a refused one never makes the batch's others fail)."""
        try:
            self.enqueue_job(job, lane, delay_ms)
        except Exception:
            log.exception("enqueue failed after commit", extra={"fields": {"job_id": job.job_id}})
            return False
        return True

    def _defer(self, jobs: list[JobPayload], entity_id: str, trace: str) -> None:
        """Targets whose enqueue failed: due now, so the next reconcile pass re-enqueues them; markers forgotten."""
        log.warning(
            "enqueue failed after commit; the reconciler will pick the targets up",
            extra={
                "fields": {"entity_id": entity_id, "account_ids": [job.account_id for job in jobs], "trace_id": trace}
            },
        )
        with self.db.write() as conn:
            for job in jobs:
                targets.mark_unqueued(conn, TargetKey(job.tenant_id, job.entity_id, job.account_id))
        for job in jobs:
            self.markers.release(Mark.of(job))


class Producer(Intake):
    """The intake of a process' clients: its database, its Redis for the enqueue markers and its broker."""

    def __init__(self, clients: Clients) -> None:
        settings = clients.settings
        queues = lanes_of(settings)

        def enqueue(job: JobPayload, lane: Lane, delay_ms: int | None) -> None:
            clients.broker.enqueue(sync_message(queues.queue(lane), job), delay=delay_ms)

        markers = RedisMarkers(
            clients.redis,
            clients.keys,
            ttl_seconds=settings.dedup_ttl,
            window_ms=round(settings.coalesce_window * 1000),
            max_wait_ms=round(settings.coalesce_max_wait * 1000),
        )
        super().__init__(
            clients.db,
            markers,
            enqueue,
            default_send_updates=settings.default_send_updates,
            request_key_ttl=settings.request_key_ttl,
            lanes=lane_choice(clients),
        )


def submit_change(
    tenant_id: str,
    change: Change | dict[str, Any],
    *,
    trace_id: str | None = None,
    request_key: str | None = None,
    clients: Clients | None = None,
) -> Receipt:
    """Accept a change for a tenant (see :class:`Producer`); uses the process-wide clients by default."""
    return Producer(clients or default_clients()).submit(tenant_id, change, trace_id=trace_id, request_key=request_key)


MESSAGE_KEY_PREFIX: Final = "dramatiq-message:"  # request key of an intake message sent without a request_id


def submit_intake(intake: Intake, message: IntakeMessage, *, message_id: str | None) -> Receipt:
    """Save the message's change and fan out its sync jobs, once per request key: the message's request id, else
    its Dramatiq message id."""
    request_key = message.request_id or (MESSAGE_KEY_PREFIX + message_id if message_id else None)
    receipt = intake.submit(message.tenant_id, message.change, trace_id=message.trace_id, request_key=request_key)
    log.info(
        "intake message accepted",
        extra={"fields": {"tenant_id": message.tenant_id, "request_id": message.request_id, **receipt.as_json()}},
    )
    return receipt


def intake_actor(intake: Intake, delivered: Callable[[IntakeMessage], str | None]) -> Callable[..., None]:
    """The function the intake actor runs; ``delivered`` sees each message once parsed and tells the id of the
    delivery's message (None: none known)."""

    def submit_change(*args: Any, **kwargs: Any) -> None:
        """Accept one change sent as a message: validate, save the intent, enqueue its sync jobs."""
        message = parse_intake(args, kwargs)
        submit_intake(intake, message, message_id=delivered(message))

    return submit_change

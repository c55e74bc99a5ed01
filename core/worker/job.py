"""The sync job, top to bottom in :func:`run_sync`: parse, drop if stale, lock, read, decide, call, record.

The job's state is read once, before the lock: a job whose version is already superseded or synced is
acked as ``stale`` without touching the lock, so stale jobs never queue for a lock they do not need
(versions only grow, so this is safe). Under the lock the same checks are exact: the lock's handover
says whether any holder wrote since that read, and only then is the state read again (core/worker/
snapshot.py). The job hands over, on release, what it leaves the target as, or nothing when a write's
outcome is unknown.

The operation is decided from state, not from the payload: no external id yet → create; event
cancelled or target removed → delete; else update. So an update whose create was skipped as stale
still creates. The sync result and the idempotency record are committed in ONE transaction, and the
result is a compare-and-set on ``synced_version``, so a late, superseded writer cannot regress it;
a write that loses the CAS enqueues a repair sync of the latest version.

A busy target lock is not a failure: the job raises :class:`~core.model.errors.TargetLocked`, which
``ScheduledRetries`` turns into a later delivery that uses no attempt (``LOCK_RETRY_DELAY``, at most
``LOCK_MAX_WAITS`` times). The provider call goes through the traffic gate (core/traffic/):
over a limit, blocked by a provider's back-off or behind an open breaker it raises a ``Held`` deferral,
which uses no attempt either. Before a create through an adapter without an idempotent create (EWS),
once admitted, the target's ``create_attempted`` marker is committed (once per target), so a later
attempt knows it must look for what this one may have made. The webhook outbox row, when the tenant
wants one, is written in the result's transaction (core/webhooks/outbox.py). Failures are raised as
they are; the retry middleware decides what follows.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import dramatiq

from calsync.core.config.logging import bind_job
from calsync.core.messaging.messages import rerun_message
from calsync.core.model.calendar import (
    Account,
    EventState,
    ExternalRef,
    Provider,
    ProviderLookup,
    needs_create_marker,
)
from calsync.core.model.errors import (
    AccountInactive,
    AuthRevoked,
    EntityNotFound,
    InvalidPayload,
    SecretKeyMismatch,
    TargetLocked,
)
from calsync.core.model.payload import SYNC_JOB, JobPayload, Operation, parse_payload, raw_ids
from calsync.core.model.planner import operation_for
from calsync.core.model.vocabulary import Outcome
from calsync.core.redis.keys import RedisKeys
from calsync.core.redis.locks import LockManager
from calsync.core.store import idempotency, targets
from calsync.core.store.crypto import CredentialCipher
from calsync.core.store.database import Database
from calsync.core.store.targets import TargetRow
from calsync.core.store.unreadable_secrets import UnreadableSecrets
from calsync.core.traffic import TrafficGate
from calsync.core.webhooks import Outbox
from calsync.core.worker import cancellation
from calsync.core.worker.delivery import Delivery, current_delivery
from calsync.core.worker.metrics import lock_attempt, provider_request
from calsync.core.worker.snapshot import Snapshot, left_as, load_snapshot, still_current

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class JobParts:
    """What a sync job uses, handed over once when the actor is declared."""

    db: Database
    cipher: CredentialCipher
    locks: LockManager
    keys: RedisKeys
    providers: ProviderLookup
    broker: dramatiq.Broker  # where a repair sync is enqueued
    queue: str
    idempotency_ttl: int
    traffic: TrafficGate = field(default_factory=lambda: TrafficGate(None, {}))  # limits, back-off, breakers
    delete_verify_delay: float = 0  # DELETE_VERIFY_DELAY (core/worker/cancellation.py)
    trust_handover: bool = True  # LOCK_HANDOVER: the early read stands when the lock's handover says so
    outbox: Outbox | None = None  # webhook notifications recorded with the result (None: never)
    unreadable: UnreadableSecrets = field(default_factory=UnreadableSecrets)  # credentials the keys cannot open


def run_sync(parts: JobParts, delivery: Delivery, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Outcome:
    """Make one target match its event's latest state, exactly once per logical effect."""
    payload = _parse(delivery, args, kwargs)
    delivery.begin(payload)
    early = _snapshot(parts, payload)  # before the lock: a finished or stale job never waits
    if early.account is not None:
        delivery.provider = early.account.provider  # for its metrics, however it ends
    if early.already_done:
        return Outcome.ALREADY_DONE
    if _superseded(early, payload, repair=delivery.repair):
        return Outcome.STALE
    key = (payload.tenant_id, payload.entity_id, payload.account_id)
    held = parts.locks.acquire(parts.keys.lock(*key), handover=parts.keys.handover(*key))
    lock_attempt(acquired=held is not None)
    if held is None:
        raise TargetLocked(f"target {payload.entity_id}/{payload.account_id} is being synced by another delivery")
    leaves: str | None = None  # what this job leaves the target as, handed over on release (None: unknown)
    try:
        current = parts.trust_handover and still_current(early, held.handed_over, taken_over=held.taken_over)
        snapshot = early if current else _snapshot(parts, payload)  # a holder wrote since
        leaves = left_as(snapshot.target) if snapshot.target is not None else None
        if snapshot.already_done:
            return Outcome.ALREADY_DONE
        if _superseded(snapshot, payload, repair=delivery.repair):
            return Outcome.STALE  # the same check, exact under the lock
        account, event, target = _checked(snapshot, payload)
        # What the provider must do to show the latest state, whatever the payload said; an account being removed
        # (`accounts remove --detach`) is wanted by no event, even one a change put back meanwhile.
        wanted = target.wanted == "present" and account.status != "removing"
        effect = operation_for(target, wanted_present=wanted, cancelled=event.status == "cancelled")
        provider = parts.providers.get(account.provider)
        stored = target  # the row as this job knows it is stored; what it hands over on release
        with parts.traffic.call(account, payload, delivery.provider_requests):  # over a limit: Held, a deferral
            if _needs_marker(provider, target, effect):  # committed before anything is sent
                leaves = None  # unknown until the commit returns
                with parts.db.write() as tx:
                    targets.mark_create_attempted(tx, target.key)
                stored = replace(stored, create_attempted=True)  # the call's view (target) still says none was
                leaves = left_as(stored)
            ref = _call_provider(provider, account, event, target, effect, taken_over=held.taken_over)
        leaves = None
        if _record_result(parts, payload, event, target, effect, ref):
            leaves = left_as(replace(stored, synced_version=event.version))
        else:
            _repair_if_overtaken(parts, payload, target, event.version)
        if effect == "delete":  # re-run it if a create may land later; log a completed cancellation
            cancellation.after_delete(parts.db, parts.broker, parts.queue, payload, event, target,
                                      verify_delay=parts.delete_verify_delay)  # fmt: skip
        delivery.result.update(effect=effect, synced_version=event.version)  # logged on the job's one line
        return Outcome.SUCCESS
    finally:
        try:
            parts.locks.release(held, leaves=leaves)
        except Exception:
            log.warning("could not release the target lock; it expires by its TTL", exc_info=True)


def sync_actor(parts: JobParts) -> Callable[..., None]:
    """The function the sync actor runs: one delivery of :func:`run_sync`, its outcome told to the delivery."""

    def sync_calendar_event(*args: Any, **kwargs: Any) -> None:
        """Make one event appear (or disappear) in one account, as its latest version says."""
        delivery = current_delivery.get() or Delivery("direct", SYNC_JOB, "")  # called without the worker's middleware
        delivery.outcome = run_sync(parts, delivery, args, kwargs)

    return sync_calendar_event


def _parse(delivery: Delivery, args: Sequence[Any], kwargs: Mapping[str, Any]) -> JobPayload:
    try:
        if kwargs:
            raise InvalidPayload("keyword arguments are not part of the job schema", ids=raw_ids(args))
        return parse_payload(args)
    except InvalidPayload as exc:
        bind_job({**delivery.log_fields(), **exc.ids})  # the rejection's log lines name every id it carried
        raise


def _snapshot(parts: JobParts, payload: JobPayload) -> Snapshot:
    # Credentials this worker's keys cannot open: the job waits for one that can (core/store/unreadable_secrets.py).
    try:
        return load_snapshot(parts.db, parts.cipher, payload)
    except SecretKeyMismatch:
        raise parts.unreadable.held(payload.account_id, "account") from None


def _superseded(snapshot: Snapshot, payload: JobPayload, *, repair: bool) -> bool:
    # A newer version exists (its own job will sync it), this version is synced already, or the target is
    # dead-lettered (failed): its record is what replays it, under a new job, after reopening it (an operator's
    # cancel dead-letters a queued job's target so, and a duplicate delivery of a dead-lettered job finds it so).
    # When the event or target is missing, _checked says what exactly.
    if snapshot.event is None or snapshot.target is None:
        return False
    wanted = payload.target_version
    dead_lettered = snapshot.target.status == "failed"
    return snapshot.event.version > wanted or (snapshot.target.synced_version >= wanted and not repair) or dead_lettered


def _checked(snapshot: Snapshot, payload: JobPayload) -> tuple[Account, EventState, TargetRow]:
    account, event, target = snapshot.account, snapshot.event, snapshot.target
    if event is None:
        raise EntityNotFound(f"event {payload.entity_id} of tenant {payload.tenant_id} does not exist")
    if target is None:
        raise EntityNotFound(f"event {payload.entity_id} is not synced to account {payload.account_id}")
    if account is None or account.tenant_id != payload.tenant_id:
        raise EntityNotFound(f"account {payload.account_id} does not exist for tenant {payload.tenant_id}")
    if account.status == "needs_reauth":
        raise AuthRevoked(f"account {account.id} awaits re-authorization")
    if account.status == "disabled":
        raise AccountInactive(f"account {account.id} is disabled")
    return account, event, target


def _needs_marker(provider: Provider, target: TargetRow, effect: Operation) -> bool:
    # An adapter without an idempotent create (EWS) looks up what a lost create made unless the target says no
    # create was ever sent: say that one may have been, durably, before this one goes out. This attempt's view
    # still says none was (the snapshot's), so its create skips the lookup; every later attempt makes it.
    return effect == "create" and not target.create_attempted and needs_create_marker(provider)


def _call_provider(
    provider: Provider, account: Account, event: EventState, target: TargetRow, effect: Operation, *, taken_over: bool
) -> ExternalRef | None:
    view = target.view()
    if taken_over:  # the lock's last owner died mid-job: it may have sent a create and left no trace (any release)
        view = replace(view, create_attempted=True)
    with provider_request(account.provider, effect):
        if effect == "delete":
            provider.delete(account, view, send_updates=event.send_updates)
            return None
        return provider.upsert(account, event, view)


def _record_result(
    parts: JobParts,
    payload: JobPayload,
    event: EventState,
    target: TargetRow,
    effect: Operation,
    ref: ExternalRef | None,
) -> bool:
    # The sync result (a compare-and-set) and the idempotency record, in one transaction; False if a
    # newer version had been recorded meanwhile.
    external_id = ref.external_id if ref else target.external_id
    result = {"effect": effect, "external_id": external_id, "version": event.version}
    with parts.db.write() as tx:
        won = targets.record_synced(
            tx,
            target.key,
            version=event.version,
            external_id=ref.external_id if ref else None,
            etag=ref.etag if ref else target.external_etag,
            final_status="deleted" if effect == "delete" else "synced",
        )
        idempotency.record_success(
            tx, payload.idempotency_key, job_id=payload.job_id, result=result, ttl_seconds=parts.idempotency_ttl
        )
        notified = parts.outbox.on_synced(tx, payload, event, effect, external_id) if parts.outbox else []
    if notified and parts.outbox is not None:
        parts.outbox.send(parts.broker, notified)
    return won


def _repair_if_overtaken(parts: JobParts, payload: JobPayload, target: TargetRow, version: int) -> None:
    # Our write lost the compare-and-set: if a newer version was recorded, our older write may have reached
    # the provider after it (our lock had expired while we were paused), so sync the newest version again,
    # bypassing the "already synced" check with the repair option and a key of its own. synced_version only
    # grows, so reading it after the commit is as good as inside.
    with parts.db.read() as conn:
        latest = targets.get_target(conn, target.key)
    if latest is None or latest.synced_version <= version:
        return
    operation: Operation = "delete" if latest.wanted == "absent" else "update"
    key = f"{payload.idempotency_key}:repair:{payload.job_id}"
    repair = rerun_message(parts.queue, payload, operation, latest.synced_version, key)
    parts.broker.enqueue(repair)
    log.warning(
        "older write landed after a newer one; repair sync enqueued",
        extra={"fields": {"repair_job_id": repair.args[0]["job_id"], "latest_version": latest.synced_version}},
    )

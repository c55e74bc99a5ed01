"""The body of a sync job: from the latest local state, decide, call the provider, record the result.

The operation is decided from state, not from the payload: no external id yet → create; event
cancelled or target removed → delete; else update. So an update whose create was skipped as stale
still creates. The sync result and the idempotency record are committed in ONE transaction, and the
result is a compare-and-set on ``synced_version``, so a late, superseded writer cannot regress it;
a write that loses the CAS enqueues a repair sync of the latest version.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Literal

from calsync.core.messaging.messages import sync_message
from calsync.core.model.calendar import Account, EventState, ExternalRef, ProviderLookup
from calsync.core.model.errors import AccountInactive, AuthRevoked, EntityNotFound
from calsync.core.model.payload import JobPayload, new_payload, parse_payload
from calsync.core.model.vocabulary import Outcome
from calsync.core.store import idempotency, targets
from calsync.core.store.targets import TargetRow
from calsync.core.worker.context import current_job, job_snapshot
from calsync.core.worker.metrics import provider_request
from calsync.core.worker.snapshot import Snapshot, load_snapshot

if TYPE_CHECKING:
    from calsync.core.runtime import Runtime

log = logging.getLogger(__name__)

Effect = Literal["create", "update", "delete"]


def effective_operation(event: EventState, target: TargetRow) -> Effect:
    """What the provider must do to show the latest state, whatever the payload said."""
    if event.status == "cancelled" or target.wanted == "absent":
        return "delete"
    return "create" if target.external_id is None else "update"


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


def run_sync(runtime: Runtime, providers: ProviderLookup, payload_arg: Any) -> Effect:
    """Make one target match its event's latest state, exactly once per logical effect."""
    ctx = current_job()
    payload = ctx.payload if ctx and ctx.payload else parse_payload([payload_arg])
    snapshot = job_snapshot(runtime, ctx) if ctx and ctx.payload else load_snapshot(runtime, payload)
    account, event, target = _checked(snapshot, payload)
    provider = providers.get(account.provider)
    effect = effective_operation(event, target)

    ref: ExternalRef | None = None
    with provider_request(account.provider, effect):
        if effect == "delete":
            provider.delete(account, target.view(), send_updates=event.send_updates)
        else:
            ref = provider.upsert(account, event, target.view())

    result = {"effect": effect, "external_id": ref.external_id if ref else target.external_id, "version": event.version}
    with runtime.db.direct_write() as tx:
        won = targets.record_synced(
            tx,
            target.key,
            version=event.version,
            external_id=ref.external_id if ref else None,
            etag=ref.etag if ref else target.external_etag,
            final_status="deleted" if effect == "delete" else "synced",
        )
        idempotency.record_success(
            tx,
            payload.idempotency_key,
            job_id=payload.job_id,
            result=result,
            ttl_seconds=runtime.settings.idempotency_ttl,
        )
    latest = None
    if not won:  # synced_version only grows, so reading it after the commit is as good as inside
        with runtime.db.read() as conn:
            latest = targets.get_target(conn, target.key)
    if latest is not None and latest.synced_version > event.version:
        _enqueue_repair(runtime, payload, latest)
    if ctx is not None:
        ctx.outcome = Outcome.SUCCESS
    log.info("provider synced", extra={"fields": {"effect": effect, "synced_version": event.version}})
    return effect


def _enqueue_repair(runtime: Runtime, payload: JobPayload, latest: TargetRow) -> None:
    # Our older write reached the provider after a newer one was recorded (our lock had expired while we
    # were paused): the provider now shows old data, so sync the newest version again, bypassing the
    # "already synced" check with the repair option and a key of its own.
    repair = new_payload(
        tenant_id=payload.tenant_id,
        entity_id=payload.entity_id,
        account_id=payload.account_id,
        operation="delete" if latest.wanted == "absent" else "update",
        version=latest.synced_version,
        trace_id=payload.trace_id,
        key=f"{payload.idempotency_key}:repair:{payload.job_id}",
    )
    runtime.broker.enqueue(sync_message(runtime.settings.queue, repair, options={"repair": True}))
    log.warning(
        "older write landed after a newer one; repair sync enqueued",
        extra={"fields": {"repair_job_id": repair.job_id, "latest_version": latest.synced_version}},
    )

"""What other services call inside their request: validate, save the intent, enqueue, return at once.

``submit_change`` commits the new event version with every affected target ``pending`` in one
transaction, and only then enqueues one ``sync_calendar_event`` job per target. If the enqueue fails
after the commit nothing is lost: the targets stay pending and ``calsync reconcile`` re-enqueues them.
A dedup marker per (target, operation, version) suppresses identical enqueues within ``DEDUP_TTL``;
it is an optimisation, never the source of truth. Submitting a change identical to the current state
creates no new version, so a client retrying its request gets the same receipt.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass, field
from typing import Any

import redis
from pydantic import TypeAdapter, ValidationError
from sqlalchemy import Connection

from calsync.core.messaging.messages import sync_message
from calsync.core.model.change import Change, parse_change
from calsync.core.model.errors import EntityNotFound, InvalidChange
from calsync.core.model.ids import Identifier, new_id, new_trace_id
from calsync.core.model.payload import Operation, new_payload
from calsync.core.runtime import Runtime, default_runtime
from calsync.core.store import accounts, events, targets
from calsync.core.store.targets import TargetKey, TargetRow

log = logging.getLogger(__name__)
_tenant_id = TypeAdapter(Identifier)


@dataclass(frozen=True)
class Receipt:
    """What the caller gets back: the event, its new version and the jobs that will sync it."""

    entity_id: str
    version: int
    job_ids: list[str]
    deferred_accounts: list[str] = field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        """The receipt as printed by ``calsync submit``."""
        return {
            "entity_id": self.entity_id,
            "version": self.version,
            "job_ids": self.job_ids,
            "deferred_accounts": self.deferred_accounts,
        }


@dataclass(frozen=True)
class _PlannedJob:
    account_id: str
    operation: Operation
    # Operations whose recent enqueue for the same version already covers this job (dedup markers).
    covered_by: tuple[Operation, ...] = ()


def _operation(row: TargetRow | None, *, wanted_present: bool, cancelled: bool) -> Operation:
    # "create" only for a target appearing for the first time: its key has no version, so a later version
    # labelled "create" would be skipped as already done. The worker still creates when no event exists yet.
    if cancelled or not wanted_present:
        return "delete"
    return "create" if row is None else "update"


class Producer:
    """Accepts changes for one runtime (database, Redis, broker)."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def submit(self, tenant_id: str, change: Change | dict[str, Any], *, trace_id: str | None = None) -> Receipt:
        """Validate and authorize, save the intent, then enqueue one job per affected target."""
        try:
            tenant_id = _tenant_id.validate_python(tenant_id)
        except ValidationError:
            raise InvalidChange(f"tenant_id: {tenant_id!r} is not a valid identifier") from None
        parsed = parse_change(change)
        trace = trace_id or new_trace_id()
        with self.runtime.db.write() as conn:
            entity_id, version, jobs = self._save_intent(conn, tenant_id, parsed)
        return self._enqueue(tenant_id, entity_id, version, jobs, trace)

    def _check_accounts(self, conn: Connection, tenant_id: str, account_ids: tuple[str, ...]) -> None:
        for account_id in account_ids:
            account = accounts.get_summary(conn, account_id)
            if account is None or account.tenant_id != tenant_id:
                raise InvalidChange(f"accounts: account {account_id} does not exist for tenant {tenant_id}")
            if account.status == "disabled":
                raise InvalidChange(f"accounts: account {account_id} is disabled")

    def _save_intent(self, conn: Connection, tenant_id: str, change: Change) -> tuple[str, int, list[_PlannedJob]]:
        settings = self.runtime.settings
        send_updates = change.send_updates or settings.default_send_updates
        if change.accounts is not None:
            self._check_accounts(conn, tenant_id, change.accounts)
        existing = events.get_event(conn, tenant_id, change.entity_id) if change.entity_id else None
        now = dt.datetime.now(dt.UTC)

        if change.operation == "delete":
            if existing is None:
                raise EntityNotFound(f"entity_id: event {change.entity_id} does not exist for tenant {tenant_id}")
            if existing.status == "cancelled":
                return existing.id, existing.version, []
            version = events.bump_event(conn, tenant_id, existing.id, status="cancelled", send_updates=send_updates)
            jobs = []
            for row in targets.list_targets(conn, tenant_id, existing.id):
                if row.status == "deleted" and row.wanted == "absent":
                    continue
                targets.plan_target(conn, row.key, wanted=row.wanted, version=version, due_at=now)
                jobs.append(_PlannedJob(row.account_id, "delete"))
            return existing.id, version, jobs

        assert change.event is not None
        if existing is None:
            if change.accounts is None:
                raise InvalidChange("accounts: required when creating an event")
            entity_id = change.entity_id or new_id("evt")
            events.insert_event(conn, tenant_id, entity_id, change.event, send_updates)
            for account_id in change.accounts:
                key = TargetKey(tenant_id, entity_id, account_id)
                targets.plan_target(conn, key, wanted="present", version=1, due_at=now)
            return entity_id, 1, [_PlannedJob(a, "create") for a in change.accounts]

        rows = {row.account_id: row for row in targets.list_targets(conn, tenant_id, existing.id)}
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
            # first submission (create or update) return its job ids instead of enqueueing twice.
            pending = [row for row in rows.values() if row.status == "pending"]
            return existing.id, existing.version, [
                _PlannedJob(row.account_id, "update" if row.wanted == "present" else "delete", ("create",))
                for row in pending
            ]

        version = events.bump_event(
            conn, tenant_id, existing.id, status="confirmed", send_updates=send_updates, fields=change.event
        )
        jobs = []
        for account_id in wanted:
            key = TargetKey(tenant_id, existing.id, account_id)
            targets.plan_target(conn, key, wanted="present", version=version, due_at=now)
            jobs.append(_PlannedJob(account_id, _operation(rows.get(account_id), wanted_present=True, cancelled=False)))
        for account_id, row in rows.items():
            if account_id in wanted or (row.wanted == "absent" and row.status == "deleted"):
                continue
            targets.plan_target(conn, row.key, wanted="absent", version=version, due_at=now)
            jobs.append(_PlannedJob(account_id, "delete"))
        return existing.id, version, jobs

    def _enqueue(self, tenant_id: str, entity_id: str, version: int, jobs: list[_PlannedJob], trace: str) -> Receipt:
        runtime = self.runtime
        job_ids: list[str] = []
        deferred: list[str] = []
        for job in jobs:
            payload = new_payload(
                tenant_id=tenant_id,
                entity_id=entity_id,
                account_id=job.account_id,
                operation=job.operation,
                version=version,
                trace_id=trace,
            )
            dedup = runtime.keys.dedup(tenant_id, entity_id, job.account_id, job.operation, version)
            covering = [runtime.keys.dedup(tenant_id, entity_id, job.account_id, op, version) for op in job.covered_by]
            earlier = self._claim(dedup, payload.job_id, covering)
            if earlier is not None:
                job_ids.append(earlier)
                continue
            try:
                runtime.broker.enqueue(sync_message(runtime.settings.queue, payload))
            except Exception:
                log.exception(
                    "enqueue failed after commit; the reconciler will pick the target up",
                    extra={"fields": {"entity_id": entity_id, "account_id": job.account_id, "trace_id": trace}},
                )
                deferred.append(job.account_id)
                self._release(dedup)
                continue
            job_ids.append(payload.job_id)
        log.info(
            "change accepted",
            extra={"fields": {"tenant_id": tenant_id, "entity_id": entity_id, "version": version, "trace_id": trace,
                              "jobs": len(job_ids), "deferred": len(deferred)}},
        )  # fmt: skip
        return Receipt(entity_id, version, job_ids, deferred)

    def _claim(self, key: str, job_id: str, covering: list[str]) -> str | None:
        """None when this enqueue is new; else the job id of the identical enqueue that came first."""
        client = self.runtime.redis
        try:
            for other in covering:
                earlier = client.get(other)
                if earlier is not None:
                    return earlier.decode() if isinstance(earlier, bytes) else str(earlier)
            if client.set(key, job_id, nx=True, ex=self.runtime.settings.dedup_ttl):
                return None
            earlier = client.get(key)
        except redis.RedisError:
            return None  # the dedup cache is optional; a duplicate job is harmless
        return earlier.decode() if isinstance(earlier, bytes) else None

    def _release(self, key: str) -> None:
        try:
            self.runtime.redis.delete(key)
        except redis.RedisError:
            log.warning("could not clear the dedup marker", exc_info=True)


def submit_change(
    tenant_id: str, change: Change | dict[str, Any], *, trace_id: str | None = None, runtime: Runtime | None = None
) -> Receipt:
    """Accept a change for a tenant (see :class:`Producer`); uses the process-wide runtime by default."""
    return Producer(runtime or default_runtime()).submit(tenant_id, change, trace_id=trace_id)

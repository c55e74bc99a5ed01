"""The one rule that turns a target's state and a change into the job to enqueue: its operation and idempotency key.

The operation (create, update or delete at the provider) follows the latest state: delete when the event is
cancelled or the target is no longer wanted, create while the target has no external id, else update. A job's
label decides its idempotency key, and a create key has no version (a target is created once), so a job may
only be labelled ``create`` while no earlier job can hold or have spent that key: for a target seen for the
first time, or, when the earlier jobs are presumed lost (the reconciler), for a target never synced.
Everything else that would create is labelled ``update`` of its version; the worker still creates from state.
"""

from __future__ import annotations

from typing import Protocol

from calsync.core.model.payload import JobPayload, Operation, new_payload

# (tenant_id, entity_id, account_id): the store's TargetKey is one.
TargetIds = tuple[str, str, str]


class TargetState(Protocol):
    """What the planner reads of a stored target (the store's row and the adapters' view both fit)."""

    @property
    def external_id(self) -> str | None:
        """The provider's id of the event, once created."""
        ...

    @property
    def synced_version(self) -> int:
        """The newest event version the provider is known to show (0: never synced)."""
        ...


def operation_for(target: TargetState | None, *, wanted_present: bool, cancelled: bool) -> Operation:
    """What the provider must do so the target shows the latest state, whatever a payload's label said."""
    if cancelled or not wanted_present:
        return "delete"
    return "update" if target is not None and target.external_id is not None else "create"


def plan(
    target: TargetState | None,
    ids: TargetIds,
    *,
    version: int,
    wanted_present: bool,
    cancelled: bool,
    trace_id: str,
    earlier_jobs_lost: bool = False,
) -> JobPayload:
    """The new job bringing the target ``ids`` to ``version``: its operation, and the idempotency key that follows."""
    operation = operation_for(target, wanted_present=wanted_present, cancelled=cancelled)
    if operation == "create" and target is not None and (not earlier_jobs_lost or target.synced_version > 0):
        operation = "update"  # an earlier job may hold (or has spent) the create key
    tenant_id, entity_id, account_id = ids
    return new_payload(
        tenant_id=tenant_id,
        entity_id=entity_id,
        account_id=account_id,
        operation=operation,
        version=version,
        trace_id=trace_id,
    )

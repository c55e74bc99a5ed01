"""The state one sync job is about (account, event, target), read together in one transaction."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from core.payload import JobPayload
from core.store import accounts, events, targets
from core.store.targets import TargetKey, TargetRow
from providers.base import Account, EventState

if TYPE_CHECKING:
    from core.runtime import Runtime


@dataclass(frozen=True)
class Snapshot:
    """The account, event and target a job is about."""

    account: Account | None
    event: EventState | None
    target: TargetRow | None


def load_snapshot(runtime: Runtime, payload: JobPayload) -> Snapshot:
    """Read the latest state a job needs in one short transaction."""
    key = TargetKey(payload.tenant_id, payload.entity_id, payload.account_id)
    with runtime.db.read() as conn:
        return Snapshot(
            account=accounts.load_account(conn, payload.account_id, runtime.cipher),
            event=events.get_event(conn, payload.tenant_id, payload.entity_id),
            target=targets.get_target(conn, key),
        )

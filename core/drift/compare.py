"""The comparison of a sweep: what calsync believes it wrote in one account against what a read-back shows.

Pure: no I/O. The rules (docs/ARCHITECTURE.md, "drift"):

- only *settled* targets are judged: status ``synced``, wanted present, with a provider id, their event's latest
  version synced, and not written since the read-back began. Anything else is work in flight, never a finding;
- an item matched to a settled target by provider id: removed → ``deleted_externally``; same etag → verified;
  another etag → verified when its fingerprint is the one calsync would write for the event's latest state,
  else ``modified_externally`` (the fingerprint is computed only then);
- a full listing that lacks a settled target's item (and did not report it removed) → ``missing``;
- a present item carrying calsync's marker for this account that no settled target shows: ``unknown_item`` when
  its ``sync_key`` names no target, or a target that is settled (with another item: a duplicate) or that calsync
  deleted (an orphan); a target still in flight is left alone. A marker naming another account (a user copied or
  moved the item) is not calsync's to delete here: never a finding;
- an incremental listing says nothing of the targets it does not mention: they stay as the last sweep found them.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from calsync.core.model.drift import DriftKind, ObservedItem, ReadBack
from calsync.core.store.targets import TargetRow


@dataclass(frozen=True)
class Believed:
    """One target of the account as stored, with what the sweep needs of it and of its event."""

    tenant_id: str
    event_id: str
    account_id: str
    status: str
    wanted: str
    external_id: str | None
    etag: str | None
    synced_version: int
    event_version: int
    updated_at: dt.datetime

    @classmethod
    def of(cls, row: TargetRow, event_version: int) -> Believed:
        """A stored target, with its event's latest version."""
        return cls(row.tenant_id, row.event_id, row.account_id, row.status, row.wanted, row.external_id,
                   row.external_etag, row.synced_version, event_version, row.updated_at)  # fmt: skip

    @property
    def sync_key(self) -> str:
        """The marker value calsync wrote for this target (core/model/calendar.py ``Target.sync_key``)."""
        return f"{self.tenant_id}:{self.event_id}:{self.account_id}"

    def settled(self, since: dt.datetime) -> bool:
        """Whether the target can be judged: calsync's last write for the event's latest version is done, and it was
        not written since ``since`` (the read-back's start)."""
        return (
            self.status == "synced"
            and self.wanted == "present"
            and self.external_id is not None
            and self.synced_version >= self.event_version
            and self.updated_at < since
        )


@dataclass(frozen=True)
class Drift:
    """One finding: its kind, the target it concerns (None for an unknown item), the provider's id of the item."""

    kind: DriftKind
    external_id: str
    target: Believed | None = None
    item: ObservedItem | None = None


@dataclass(frozen=True)
class Comparison:
    """What one sweep found: the drifts, and the settled targets it compared and found as calsync wrote them."""

    drifts: list[Drift] = field(default_factory=list)
    verified: list[Believed] = field(default_factory=list)


def compare(
    believed: Iterable[Believed],
    reading: ReadBack,
    *,
    account_id: str,
    since: dt.datetime,
    fingerprint: Callable[[Believed], str],
) -> Comparison:
    """Compare account ``account_id``'s targets with a read-back that began at ``since`` (module docstring).

    ``fingerprint(target)`` is what the adapter makes of the target's event in its latest state.
    """
    targets = list(believed)
    by_id = {t.external_id: t for t in targets if t.external_id is not None}
    by_key = {t.sync_key: t for t in targets}
    result = Comparison()
    for item in _latest(reading.items):
        target = by_id.get(item.external_id)
        if target is not None and target.settled(since):
            _judge(result, target, item, fingerprint)
        elif item.removed or item.sync_key is None or not item.sync_key.endswith(f":{account_id}"):
            continue  # gone, or not calsync's item for this account: nothing to judge
        elif _orphan(target if target is not None else by_key.get(item.sync_key), since):
            result.drifts.append(Drift("unknown_item", item.external_id, None, item))
    if reading.full:
        listed = {item.external_id for item in reading.items}
        for target in targets:
            if target.settled(since) and target.external_id not in listed:
                assert target.external_id is not None  # settled
                result.drifts.append(Drift("missing", target.external_id, target))
    return result


def marked_event(item: ObservedItem | None) -> str | None:
    """The event an item's marker names (``tenant:event:account``, as ``Believed.sync_key`` writes it), if readable."""
    parts = (item.sync_key or "").split(":") if item is not None else []
    return parts[1] if len(parts) == 3 else None


def _latest(items: Sequence[ObservedItem]) -> list[ObservedItem]:
    # One item per provider id, its last mention (a listing may report an item twice: changed, then removed).
    return list({item.external_id: item for item in items}.values())


def _judge(result: Comparison, target: Believed, item: ObservedItem, fingerprint: Callable[[Believed], str]) -> None:
    assert target.external_id is not None
    if item.removed:
        result.drifts.append(Drift("deleted_externally", target.external_id, target, item))
    elif _same_etag(item, target) or (item.fingerprint is not None and item.fingerprint == fingerprint(target)):
        result.verified.append(target)
    else:
        result.drifts.append(Drift("modified_externally", target.external_id, target, item))


def _orphan(owner: Believed | None, since: dt.datetime) -> bool:
    # A marked item that no settled target shows: an orphan when no target owns its marker, when the owner shows
    # another item (a duplicate) or was deleted by calsync; left alone while the owner's write may be in flight.
    return owner is None or owner.settled(since) or (owner.status == "deleted" and owner.updated_at < since)


def _same_etag(item: ObservedItem, target: Believed) -> bool:
    return item.etag is not None and item.etag == target.etag

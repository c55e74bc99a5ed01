"""The contract between the pipeline and a calendar provider.

The pipeline hands an adapter the latest local state (never a stale payload) and the adapter makes
the provider match it. Adapters must be idempotent on their own, because a job can run twice:

- ``upsert`` creates when ``target.external_id`` is None, else updates; a create must find and adopt
  an event it created earlier whose response was lost (deterministic id or a marker property keyed
  by ``target.sync_key``), so a retry never makes a second event. An adapter that can only find it by
  a lookup sets ``needs_create_marker``: the worker then commits ``target.create_attempted`` before
  each create, and the adapter may skip the lookup while the target says no create was ever sent;
- ``delete`` treats "already gone" as success and resolves by ``sync_key`` when no id is known;
- every failure is raised as a :mod:`core.model.errors` class, never a library exception.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from calsync.core.model.errors import InvalidRequest

ProviderName = Literal["google", "exchange", "graph", "memory"]
SendUpdates = Literal["all", "external_only", "none"]
# removing: ``accounts remove --detach`` is deleting calsync's events from it; the row goes once none is left.
AccountStatus = Literal["active", "needs_reauth", "disabled", "removing"]
BusinessStatus = Literal["confirmed", "cancelled"]


@dataclass(frozen=True)
class Account:
    """A calendar or mailbox an event is synced into, with its decrypted credentials (never printed)."""

    id: str
    tenant_id: str
    provider: ProviderName
    address: str
    status: AccountStatus = "active"
    credentials: Mapping[str, Any] = field(default_factory=dict, repr=False)
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class EventState:
    """The latest local state of an event: what the provider must end up showing."""

    id: str
    tenant_id: str
    version: int
    title: str
    start: dt.datetime | dt.date
    end: dt.datetime | dt.date
    time_zone: str
    all_day: bool
    location: str | None = None
    description: str | None = None
    attendees: tuple[str, ...] = ()
    status: BusinessStatus = "confirmed"
    send_updates: SendUpdates = "none"

    def days(self) -> tuple[dt.date, dt.date]:
        """An all-day event's first day and the day after its last (``end`` is exclusive; ``end == start`` is read as
        one day); InvalidRequest when it ends before it starts."""
        start, end = (value.date() if isinstance(value, dt.datetime) else value for value in (self.start, self.end))
        if end < start:
            raise InvalidRequest(f"event {self.id} ends ({end}) before it starts ({start})")
        return start, max(end, start + dt.timedelta(days=1))

    def instants(self, zone: dt.tzinfo) -> tuple[dt.datetime, dt.datetime]:
        """A timed event's start and end as aware date-times, a naive one being wall time in ``zone``; InvalidRequest
        for a date, or when it ends before it starts."""
        if not isinstance(self.start, dt.datetime) or not isinstance(self.end, dt.datetime):
            raise InvalidRequest("a timed event needs datetimes for start and end, got a date")
        start, end = (value if value.tzinfo else value.replace(tzinfo=zone) for value in (self.start, self.end))
        if end < start:
            raise InvalidRequest(f"event {self.id} ends ({end.isoformat()}) before it starts ({start.isoformat()})")
        return start, end


@dataclass(frozen=True)
class Target:
    """Where one event lives in one account, as last recorded locally."""

    event_id: str
    account_id: str
    tenant_id: str
    external_id: str | None = None
    etag: str | None = None
    synced_version: int = 0
    # False only when the store proves that no create was ever sent for this target (by any adapter):
    # a create then needs no lookup for one a lost response made. Unknown counts as sent.
    create_attempted: bool = True

    @property
    def sync_key(self) -> str:
        """Stable identity of (tenant, event, account): the seed of deterministic ids and marker properties."""
        return f"{self.tenant_id}:{self.event_id}:{self.account_id}"


@dataclass(frozen=True)
class ExternalRef:
    """What the provider calls the event after a write: its id and its version tag (etag / ChangeKey)."""

    external_id: str
    etag: str | None = None


class Provider(Protocol):
    """A calendar backend the worker can push local state into.

    An adapter whose provider cannot deduplicate a create by itself (EWS: no client-chosen id, no
    transaction id) declares the class attribute ``needs_create_marker = True``; see
    :func:`needs_create_marker`. Google (client-chosen event id), Graph (``transactionId``) and memory
    (deterministic ids) leave it out and never pay the marker's write.
    """

    name: ProviderName

    def upsert(self, account: Account, event: EventState, target: Target) -> ExternalRef:
        """Make the provider show ``event`` for ``target``: create (adopting a lost create) or update."""
        ...

    def delete(self, account: Account, target: Target, *, send_updates: SendUpdates = "none") -> None:
        """Remove the target's event; an event that is already gone is success."""
        ...

    def close(self) -> None:
        """Release connections and threads (worker shutdown); idempotent, and a later call may reconnect."""
        ...


def needs_create_marker(provider: Provider) -> bool:
    """Whether the worker must commit ``create_attempted`` before this adapter's creates (absent: no)."""
    return getattr(provider, "needs_create_marker", False) is True


class ProviderLookup(Protocol):
    """Which adapter serves an account's provider: the worker's registry, built by the composition root."""

    def get(self, name: ProviderName) -> Provider:
        """The adapter for ``name``."""
        ...

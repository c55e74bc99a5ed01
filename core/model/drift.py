"""Drift: what a provider shows against what calsync believes it wrote, and the contract of reading it back.

A *sweep* reads one account's calendar back and compares it with the account's targets. An adapter that
can read back implements :class:`DriftReader` beside :class:`~calsync.core.model.calendar.Provider`
(:func:`drift_reader` finds it); a provider without it is never swept.

The contract of ``read_back(account, cursor)``:

- it lists only the items that carry calsync's own marker (the property keyed by ``Target.sync_key`` that
  every create writes), never the user's other events;
- with a ``cursor`` (the one the previous sweep returned) it lists only what changed since: Google's
  ``syncToken``, Graph's delta link, EWS's ``SyncState``; an unchanged calendar costs one request;
- without a cursor, or when the provider refuses it (Google 410 ``fullSyncRequired``, Graph 410
  ``SyncStateNotFound``/``resyncRequired``, an invalid EWS ``SyncState``), it lists every marked item and says
  so with ``full=True``: only then may a synced target absent from the listing be called ``missing``;
- it returns the cursor for the next sweep; every failure is raised as a :mod:`core.model.errors` class
  (temporary or permanent), never a library exception, exactly as writes do.

``fingerprint`` makes the comparison provider-neutral: the adapter reduces the fields calsync owns (title,
times, time zone or all-day, location, description, attendees) to one string, from the body it would write
for an event and from an item it read, normalized the same way (times as UTC instants, missing and empty
text alike), so equal fingerprints mean "the calendar shows what calsync wrote".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal, Protocol, get_args, runtime_checkable

from calsync.core.model.calendar import Account, EventState, Provider

# What a sweep can find for one target or item (``calsync_drift_detected_total{provider,kind}``, drift_findings):
# - deleted_externally: the provider reports the item calsync wrote as removed (a tombstone, @removed, a Delete);
# - modified_externally: the item is there but the fields calsync owns differ from the synced version;
# - missing: a full listing lacks an item calsync synced and the provider never reported it removed;
# - unknown_item: an item carries calsync's marker but no target owns it (a duplicate, or an orphan).
DriftKind = Literal["deleted_externally", "modified_externally", "missing", "unknown_item"]
DRIFT_KINDS: Final[tuple[DriftKind, ...]] = get_args(DriftKind)

# What calsync does about drift in one tenant (settable by CLI and API; default report):
# enforce re-asserts calsync's state through the normal queue and deletes orphans calsync made,
# report changes nothing and records it and sends an ``event.drifted`` webhook, off never sweeps.
DriftPolicy = Literal["enforce", "report", "off"]
DRIFT_POLICIES: Final[tuple[DriftPolicy, ...]] = get_args(DriftPolicy)
DEFAULT_DRIFT_POLICY: Final[DriftPolicy] = "report"

# What a sweep did about one finding (drift_findings.action, ``calsync_drift_repaired_total``): recorded it and sent
# ``event.drifted`` (report), or put calsync's state back through the normal queue or deleted the orphan (enforce).
DriftAction = Literal["reported", "repaired"]
DRIFT_ACTIONS: Final[tuple[DriftAction, ...]] = get_args(DriftAction)


@dataclass(frozen=True)
class ObservedItem:
    """One marked item as the provider shows it now.

    ``sync_key`` is read from calsync's marker (None when the provider reports a removal by id only: Graph's
    ``@removed`` and EWS's Delete carry no properties). ``fingerprint`` is None for a removed item.
    """

    external_id: str
    sync_key: str | None
    etag: str | None
    removed: bool = False
    fingerprint: str | None = None


@dataclass(frozen=True)
class ReadBack:
    """One sweep's reading: the items (all marked ones when ``full``, else the changed ones) and the next cursor."""

    items: Sequence[ObservedItem]
    cursor: str | None
    full: bool


@runtime_checkable
class DriftReader(Protocol):
    """An adapter that can read an account's marked items back (module docstring)."""

    def read_back(self, account: Account, cursor: str | None) -> ReadBack:
        """The marked items changed since ``cursor`` (all of them when None or refused) and the next cursor."""
        ...

    def fingerprint(self, account: Account, event: EventState) -> str:
        """The owned fields of what ``upsert`` writes for ``event``, normalized as :meth:`read_back` does."""
        ...


def drift_reader(provider: Provider) -> DriftReader | None:
    """The provider as a drift reader, or None when it cannot read back (it is then never swept)."""
    return provider if isinstance(provider, DriftReader) else None

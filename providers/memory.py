"""The memory provider: a calendar with fault injection, for tests, the demo and the benchmark.

It reads back too (core/model/drift.py): every write is numbered in the store, a cursor is the newest number a
read-back saw, and the next one lists what changed after it (a deletion as a removed item), or every confirmed
event of the account without a usable cursor. :meth:`MemoryProvider.user_edit` and :meth:`~MemoryProvider.user_delete`
change an event as its user would, new etag included, so a sweep has drift to find.

It behaves like a careful real provider: deterministic ids derived from ``target.sync_key`` (so a
retried create adopts the event a lost response created), "already gone" deletes succeed, writes
that change nothing are no-ops, and every call is logged with its effect. Its state lives in this
process (the default) or in a SQLite file shared by every process of a data dir, so a test or the
demo can inspect what a worker subprocess did and inject faults into it (providers/memory_store.py).

Fault rules (:meth:`MemoryProvider.add_fault`) match by operation, account, entity or title and raise
one of :data:`FAULT_ERRORS`, optionally after a delay and optionally after applying the write
(``after=True``: the effect happens, the response is "lost"). Each write counts as a request handed to the
provider (core/model/provider_io.py) before its faults are looked up: a fault is the provider's answer.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final, Literal

from calsync.core.model.calendar import Account, EventState, ExternalRef, ProviderName, SendUpdates, Target
from calsync.core.model.drift import ObservedItem, ReadBack
from calsync.core.model.errors import (
    AuthRevoked,
    CalsyncError,
    Forbidden,
    InvalidRequest,
    ProviderTimeout,
    ProviderUnavailable,
    RateLimited,
)
from calsync.core.model.provider_io import request_sent
from calsync.providers.memory_store import CalendarStore, CalendarTx, Call, MemoryFaultRule, StoredEvent

#: The options a memory account may have: only traffic control's (``accounts add`` refuses any other).
OPTIONS: Final = frozenset({"max_concurrency"})


def check_account(account: Account) -> None:
    """A memory account has no fields of its own to check."""


FAULT_ERRORS: dict[str, type[CalsyncError]] = {
    "unavailable": ProviderUnavailable,
    "timeout": ProviderTimeout,
    "rate_limited": RateLimited,
    "auth": AuthRevoked,
    "forbidden": Forbidden,
    "invalid": InvalidRequest,
}


def external_id_for(sync_key: str) -> str:
    """The deterministic id of a target's event: a retried create finds what a lost create made."""
    return "mem" + hashlib.sha256(sync_key.encode()).hexdigest()[:29]


#: The fields of a stored body calsync owns, as ``fingerprint`` compares them (the rest: version, send_updates).
OWNED: Final = ("title", "start", "end", "time_zone", "all_day", "location", "description", "attendees")
_CURSOR = re.compile(r"^mem:(\d+)$")


def _fingerprint(body: dict[str, Any]) -> str:
    owned = {name: body.get(name) or None for name in OWNED if name != "all_day"}  # empty text as missing
    owned["all_day"] = bool(body.get("all_day"))
    owned["attendees"] = sorted(body.get("attendees") or [])
    return hashlib.sha256(json.dumps(owned, sort_keys=True).encode()).hexdigest()


def _body(event: EventState) -> dict[str, Any]:
    """What the calendar shows of an event, as JSON values: every field but its ids and status."""
    shown = {name: value for name, value in vars(event).items() if name not in ("id", "tenant_id", "status")}
    return shown | {"start": event.start.isoformat(), "end": event.end.isoformat(), "attendees": list(event.attendees)}


class MemoryProvider:
    """A provider whose calendar lives in this process (``path`` None) or in a shared SQLite file."""

    name: ProviderName = "memory"

    def __init__(self, path: str | Path | None = None, *, sleep: Callable[[float], None] = time.sleep) -> None:
        self._sleep = sleep  # how a fault's delay waits (a test records it instead)
        self._store = CalendarStore(path)

    # --- the Provider protocol -----------------------------------------------------------------

    def upsert(self, account: Account, event: EventState, target: Target) -> ExternalRef:
        """Create, adopt, restore or update the target's event."""
        external_id = target.external_id or external_id_for(target.sync_key)
        body = _body(event)
        with self._call("upsert", account.id, target.event_id, event.title), self._store.transaction() as tx:
            stored = tx.find(account.id, external_id)
            if stored is None:
                effect = "created"
                etag = _etag(external_id, body, 1)
                tx.save(StoredEvent(account.id, external_id, target.sync_key, etag, body, "confirmed", 1))
            elif stored.body == body and stored.status == "confirmed":
                effect = "unchanged" if target.external_id else "adopted"
                etag = stored.etag
            else:
                writes = stored.writes + 1
                effect = "restored" if stored.status == "cancelled" else "updated" if target.external_id else "adopted"
                etag = _etag(external_id, body, writes)
                tx.save(dataclasses.replace(stored, etag=etag, body=body, status="confirmed", writes=writes))
            _log(tx, "upsert", account.id, target.event_id, external_id, effect, version=event.version)
        return ExternalRef(external_id, etag)

    def delete(self, account: Account, target: Target, *, send_updates: SendUpdates = "none") -> None:
        """Cancel the target's event; an unknown or already cancelled event is success."""
        external_id = target.external_id or external_id_for(target.sync_key)
        with self._call("delete", account.id, target.event_id, None), self._store.transaction() as tx:
            stored = tx.find(account.id, external_id)
            effect = "already_gone"
            if stored is not None and stored.status == "confirmed":
                effect = "deleted"
                tx.save(dataclasses.replace(stored, status="cancelled", writes=stored.writes + 1))
            _log(tx, "delete", account.id, target.event_id, external_id, effect)

    def close(self) -> None:
        """Close the store's connections (the registry calls this when the worker shuts down)."""
        self._store.close()

    # --- the DriftReader protocol --------------------------------------------------------------

    def read_back(self, account: Account, cursor: str | None) -> ReadBack:
        """The account's events changed since ``cursor`` (removals included), or every confirmed one (``full``)
        when there is no cursor or it is not one this store gave; one request either way."""
        with self._call("read_back", account.id, "", None), self._store.transaction() as tx:
            since = _CURSOR.match(cursor or "")
            after = tx.last_change()
            if since is not None and int(since.group(1)) <= after:
                items = [_observed(stored) for stored in tx.changed_since(account.id, int(since.group(1)))]
            else:
                since = None
                items = [_observed(stored) for stored in tx.events(account.id) if stored.status == "confirmed"]
            _log(tx, "read_back", account.id, "", None, "full" if since is None else "changes")
        return ReadBack(items, f"mem:{after}", full=since is None)

    def fingerprint(self, account: Account, event: EventState) -> str:
        """The owned fields of what :meth:`upsert` stores for ``event``."""
        return _fingerprint(_body(event))

    # --- as the user did -----------------------------------------------------------------------

    def user_edit(self, account_id: str, external_id: str, *, cancel: bool = False, **fields: Any) -> StoredEvent:
        """Change fields of a stored event as its user would (its etag changes), unknown to calsync; ``cancel``
        deletes it as its user would (it is cancelled)."""
        with self._store.transaction() as tx:
            stored = tx.find(account_id, external_id)
            if stored is None:
                raise KeyError(f"no event {external_id} in account {account_id}")
            body, writes = stored.body | fields, stored.writes + 1
            status = "cancelled" if cancel else stored.status
            etag = _etag(external_id, body, writes)
            edited = dataclasses.replace(stored, body=body, status=status, writes=writes, etag=etag)
            tx.save(edited)
        return edited

    def user_delete(self, account_id: str, external_id: str) -> None:
        """Delete a stored event as its user would (it is cancelled, its etag changes), unknown to calsync."""
        self.user_edit(account_id, external_id, cancel=True)

    # --- faults --------------------------------------------------------------------------------

    def add_fault(
        self,
        *,
        error: str | None = "unavailable",
        op: Literal["upsert", "delete", "read_back"] | None = None,
        account_id: str | None = None,
        entity_id: str | None = None,
        title: str | None = None,
        times: int | None = None,
        message: str | None = None,
        retry_after: float | None = None,
        delay_ms: int = 0,
        after: bool = False,
    ) -> int:
        """Break matching calls: ``times`` of them (None = all), raising ``error`` (None = only delay)."""
        if error is not None and error not in FAULT_ERRORS:
            raise ValueError(f"unknown fault error {error!r}; choose from {sorted(FAULT_ERRORS)}")
        if times is not None and times < 1:
            raise ValueError(f"times must be at least 1 (or None for every call), not {times}")
        if title is not None:
            re.compile(title)
        rule = MemoryFaultRule(0, op, account_id, entity_id, title, error, message, retry_after, delay_ms, after, times)
        with self._store.transaction() as tx:
            return tx.add_fault(rule)

    def clear_faults(self) -> None:
        """Remove every fault rule."""
        with self._store.transaction() as tx:
            tx.clear_faults()

    @contextlib.contextmanager
    def _call(self, op: str, account_id: str, entity_id: str, title: str | None) -> Iterator[None]:
        """One call: counted as a request (a fault is the provider's answer), broken by the first matching fault
        before its write, or after it (``after``: the write happens, its answer is lost)."""
        request_sent()
        fault = self._take_fault(op, account_id, entity_id, title)
        if fault is not None and not fault.after:
            self._fail(fault, op, account_id, entity_id)
        yield
        if fault is not None and fault.after:
            self._fail(fault, op, account_id, entity_id)

    def _take_fault(self, op: str, account_id: str, entity_id: str, title: str | None) -> MemoryFaultRule | None:
        rule = next((rule for rule in self._store.faults() if rule.matches(op, account_id, entity_id, title)), None)
        if rule is None or rule.remaining is None:
            return rule  # none, or one for every call: nothing to count, so no write lock
        with self._store.transaction() as tx:  # a counted rule: its calls are taken one at a time
            for rule in tx.faults():
                if rule.matches(op, account_id, entity_id, title):
                    if rule.remaining is not None:
                        tx.set_remaining(rule.id, rule.remaining - 1)
                    return rule
        return None

    def _fail(self, fault: MemoryFaultRule, op: str, account_id: str, entity_id: str) -> None:
        if fault.delay_ms:
            self._sleep(fault.delay_ms / 1000)
        if fault.error is None:
            return
        cls = FAULT_ERRORS[fault.error]
        text = fault.message or f"injected {fault.error} fault"
        exc = cls(text, retry_after=fault.retry_after) if issubclass(cls, RateLimited) else cls(text)
        with self._store.transaction() as tx:
            _log(tx, op, account_id, entity_id, None, None, error=type(exc).__name__)
        raise exc

    # --- inspection ----------------------------------------------------------------------------

    def events(self, account_id: str | None = None) -> list[StoredEvent]:
        """Every stored event (cancelled ones too), optionally of one account."""
        with self._store.transaction() as tx:
            return tx.events(account_id)

    def calls(self) -> list[Call]:
        """Every call in order, with its effect or error."""
        with self._store.transaction() as tx:
            return tx.calls()


def _observed(stored: StoredEvent) -> ObservedItem:
    removed = stored.status != "confirmed"
    fingerprint = None if removed else _fingerprint(stored.body)
    return ObservedItem(stored.external_id, stored.sync_key, stored.etag, removed=removed, fingerprint=fingerprint)


def _etag(external_id: str, body: dict[str, Any], writes: int) -> str:
    digest = hashlib.sha256(f"{external_id}:{writes}:{json.dumps(body, sort_keys=True)}".encode()).hexdigest()
    return f'"{digest[:16]}"'


def _log(tx: CalendarTx, op: str, account_id: str, entity_id: str, external_id: str | None, effect: str | None, *,
         error: str | None = None, version: int | None = None) -> None:  # fmt: skip
    tx.log(Call(op, account_id, entity_id, external_id, version, effect, error, time.time()))

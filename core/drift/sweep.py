"""The sweep job, top to bottom in :func:`run_sweep`: load the state, read back under the traffic gate, compare,
record the findings and the verified targets, apply the policy, save the cursor.

A sweep is one account's: actor ``sweep_account`` (declared by the composition root, actors/declare.py) on the
queue ``<CALSYNC_QUEUE>-drift``, its one argument ``{"account_id": ..., "claim": ...}`` (``claim``: the
next_sweep_at the scheduler's claim set; absent for a sweep asked by hand). A sweep whose claim a later one
replaced is dropped: a sweep retried through an outage never runs beside the one the next interval enqueued.

Failures: the read-back goes through the traffic gate like a write (over a limit, backing off or behind an open
breaker: ``Held``, a deferral that uses no attempt); a temporary failure is raised and retried by the worker's
schedule; a permanent one (refused credentials, a calendar that is gone) is counted on the account's state and
logged, not dead-lettered (the next interval tries again; ``failures`` and the sweep age tell it). Findings come
only from a read-back that succeeded, and the cursor is saved in the transaction that records them, so a sweep
that fails anywhere before the commit is repeated whole and reports nothing twice.

The targets are read *after* the read-back, and a target written since it began is not judged (core/drift/
compare.py): a sync that lands during the sweep is work in flight, never drift.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import dramatiq

from calsync.core.drift import actions, store
from calsync.core.drift.compare import Believed, compare, marked_event
from calsync.core.drift.metrics import count_finding
from calsync.core.drift.store import Finding
from calsync.core.messaging.messages import SWEEP_JOB
from calsync.core.model.calendar import Account, EventState, ProviderLookup
from calsync.core.model.drift import DriftReader, ReadBack, drift_reader
from calsync.core.model.errors import Deferred, InvalidPayload, PermanentError
from calsync.core.model.provider_io import RequestsSent
from calsync.core.store import accounts
from calsync.core.store.crypto import CredentialCipher
from calsync.core.store.database import Database
from calsync.core.traffic import TrafficGate
from calsync.core.webhooks import Outbox

log = logging.getLogger(__name__)


def sweep_message(queue: str, account_id: str, claim: dt.datetime | None = None) -> dramatiq.Message[Any]:
    """A sweep of ``account_id`` on the sweeps' ``queue`` (``claim``: the next_sweep_at its claim set)."""
    arg = {"account_id": account_id} | ({"claim": claim.isoformat()} if claim is not None else {})
    return dramatiq.Message(queue_name=queue, actor_name=SWEEP_JOB, args=(arg,), kwargs={}, options={})


@dataclass(frozen=True)
class SweepParts:
    """What a sweep uses, handed over once when the actor is declared."""

    db: Database
    cipher: CredentialCipher
    providers: ProviderLookup
    broker: dramatiq.Broker  # where repairs go
    queue: str  # the sync queue (repairs are sync jobs)
    traffic: TrafficGate = field(default_factory=lambda: TrafficGate(None, {}))
    outbox: Outbox | None = None  # event.drifted notifications (None: never)


@dataclass
class SweepResult:
    """How one sweep ended (its log line; metrics count ``findings`` by provider and kind)."""

    account_id: str
    provider: str = "unknown"
    skipped: str | None = None  # why nothing was read: not found, inactive, off, no reader, superseded, failed
    full: bool = False
    findings: list[Finding] = field(default_factory=list)
    verified: int = 0

    def fields(self) -> dict[str, Any]:
        """The log line's fields."""
        kinds = [f"{f.kind}:{f.action}" for f in self.findings]
        return {"account_id": self.account_id, "skipped": self.skipped, "full": self.full, "findings": kinds,
                "verified": self.verified}  # fmt: skip


def run_sweep(parts: SweepParts, account_id: str, *, claim: dt.datetime | None = None,
              sent: RequestsSent | None = None) -> SweepResult:  # fmt: skip
    """Sweep one account: read back, compare, record, apply the tenant's policy (module docstring)."""
    result, sent = SweepResult(account_id), sent or RequestsSent()
    with parts.db.read() as conn:
        account = accounts.load_account(conn, account_id, parts.cipher)
        if account is None:
            result.skipped = "not found"
            return result
        state = store.sweep_state(conn, account_id)
        policy = store.policy_of(conn, account.tenant_id)
    result.provider = account.provider
    reader = drift_reader(parts.providers.get(account.provider))
    skips = {  # why this sweep reads nothing: the first that applies (none: it runs)
        "inactive": account.status != "active",
        "off": policy == "off",
        "no reader": reader is None,
        # A later claim enqueued another sweep of the account.
        "superseded": claim is not None and state is not None and state.next_sweep_at > claim,
    }
    result.skipped = next((why for why, applies in skips.items() if applies), None)
    if result.skipped is not None or reader is None:
        return result
    started = _now()
    reading = _read_back(parts, account, reader, state.cursor if state is not None else None, sent, result)
    if reading is None:
        return result
    believed, events = _believed(parts.db, account, reading)
    comparison = compare(believed, reading, account_id=account.id, since=started,
                         fingerprint=lambda target: reader.fingerprint(account, events[target.event_id]))  # fmt: skip
    if policy == "enforce":  # orphans go first: a failure here repeats the whole sweep
        provider = parts.providers.get(account.provider)
        actions.delete_orphans(provider, account, comparison.drifts, parts.traffic, sent)
    with parts.db.write() as tx:
        settled = actions.record(tx, account, comparison, policy, outbox=parts.outbox, now=_now())
        # What the changes did not mention is as the last sweep found it: verified as of this sweep's start, read
        # from the account's state by the targets' view (core/store/targets.py), not written to each target.
        store.record_sweep(tx, account.id, cursor=reading.cursor, now=started)
    actions.send(parts.db, parts.broker, parts.queue, settled, parts.outbox)
    for finding in settled.findings:
        count_finding(account.provider, finding.kind, repaired=finding.action == "repaired")
    result.full, result.findings, result.verified = reading.full, settled.findings, len(comparison.verified)
    return result


def parse_sweep(arg: Any) -> tuple[str, dt.datetime | None]:
    """The account id and the claim of a sweep message's argument; InvalidPayload when it is not one."""
    if not isinstance(arg, Mapping) or not isinstance(arg.get("account_id"), str):
        raise InvalidPayload('a sweep takes one argument: {"account_id": "...", "claim": "<ISO 8601>"}')
    claim = arg.get("claim")
    if claim is None:
        return arg["account_id"], None
    try:
        when = dt.datetime.fromisoformat(claim) if isinstance(claim, str) else None
    except ValueError:
        when = None
    if when is None or when.tzinfo is None:
        raise InvalidPayload(f"a sweep's claim is not an ISO 8601 time with its offset: {claim!r}")
    return arg["account_id"], when


def _read_back(
    parts: SweepParts,
    account: Account,
    reader: DriftReader,
    cursor: str | None,
    sent: RequestsSent,
    result: SweepResult,
) -> ReadBack | None:
    # The read-back under the traffic gate; a permanent failure is counted and logged (None), any other raised.
    try:
        with parts.traffic.call(account, None, sent):
            return reader.read_back(account, cursor)
    except PermanentError as exc:
        result.skipped = "failed"
        log.warning("drift sweep refused by the provider; trying again next interval",
                    extra={"fields": {"account_id": account.id, "error_class": type(exc).__name__}})  # fmt: skip
        _count_failure(parts.db, account.id)
        return None
    except Deferred:
        raise  # held by traffic control: not a failure, it runs again after the wait
    except Exception:
        _count_failure(parts.db, account.id)
        raise


def _count_failure(db: Database, account_id: str) -> None:
    try:
        with db.write() as tx:
            store.record_sweep_failure(tx, account_id)
    except Exception:
        log.warning("could not count a failed sweep", exc_info=True)


def _believed(db: Database, account: Account, reading: ReadBack) -> tuple[list[Believed], dict[str, EventState]]:
    # Every target of the account for a full listing; for changes, those the items name (by id or marker). No
    # change, nothing to believe: an unchanged calendar's sweep opens no transaction for it.
    if not reading.full and not reading.items:
        return [], {}
    marked = {event_id for event_id in map(marked_event, reading.items) if event_id is not None}
    external_ids = [item.external_id for item in reading.items]
    with db.read() as conn:
        pairs = store.account_targets(conn, account.id, event_ids=None if reading.full else marked,
                                      external_ids=external_ids)  # fmt: skip
    return [Believed.of(row, event.version) for row, event in pairs], {event.id: event for _, event in pairs}


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)

"""Sweeps end to end with the memory provider: real broker, database, worker threads and webhook receiver.

An event deleted or edited "by the user" (the memory calendar's user_delete / user_edit, new etag included) is put
back within one sweep under enforce, and reported (a finding, and an ``event.drifted`` webhook verified with
``standardwebhooks``) under report; an orphan carrying calsync's marker is deleted; off never sweeps."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY
from sqlalchemy import Connection, event

from calsync.core.drift.sweep import run_sweep
from calsync.core.model.calendar import Account, EventState, Target
from calsync.core.store import accounts, targets
from tests.drift.conftest import Drift
from tests.drift.support import FIELDS
from tests.support import wait_until
from tests.webhooks.receiver import Receiver

pytestmark = pytest.mark.integration


def memory_account(drift: Drift, account_id: str) -> Account:
    """The account as an adapter gets it."""
    with drift.pipeline.clients.db.read() as conn:
        account = accounts.load_account(conn, account_id, drift.pipeline.clients.cipher)
    assert account is not None
    return account


def _counted(kind: str) -> tuple[float, float]:
    """calsync_drift_detected_total and calsync_drift_repaired_total of the memory provider's ``kind``."""
    labels = {"provider": "memory", "kind": kind}
    return tuple(REGISTRY.get_sample_value(f"calsync_drift_{name}_total", labels) or 0.0  # type: ignore[return-value]
                 for name in ("detected", "repaired"))  # fmt: skip


def test_a_first_sweep_lists_everything_and_verifies_what_calsync_wrote(drift: Drift) -> None:
    account = drift.pipeline.account()
    event, _external_id = drift.synced(account, title="Planning")
    result = drift.sweep(account)
    assert (result.full, result.findings, result.verified) == (True, [], 1)
    row = drift.pipeline.target(event, account)
    assert row.verified_at is not None and row.drift_kind is None
    again = drift.sweep(account)  # nothing changed: the cursor lists nothing, the target stays verified
    assert (again.full, again.findings) == (False, [])
    assert [c.effect for c in drift.pipeline.provider.calls() if c.op == "read_back"] == ["full", "changes"]
    state = drift.state(account)
    assert state is not None and state.cursor is not None and state.failures == 0
    with drift.pipeline.clients.db.read() as conn:  # the event's view: verified as of the second sweep, unwritten
        [shown] = targets.shown_targets(conn, "tenant-1", event)
    assert shown.verified_at == state.swept_at and state.swept_at > row.verified_at  # type: ignore[operator]
    assert drift.pipeline.target(event, account).verified_at == row.verified_at  # no write per target per sweep


def test_an_unchanged_calendar_s_sweep_is_one_read_and_one_write_transaction(drift: Drift) -> None:
    # The account's state in, the cursor out: with no change there are no targets to read (a third transaction
    # was an eighth of the sweep's CPU, docs/notes/drift.md).
    account = drift.pipeline.account()
    drift.synced(account, title="Planning")
    drift.sweep(account)
    opened: list[Connection] = []

    def count(conn: Connection) -> None:
        opened.append(conn)

    engine = drift.pipeline.clients.db.engine
    event.listen(engine, "engine_connect", count)
    try:
        result = run_sweep(drift.parts, account)
    finally:
        event.remove(engine, "engine_connect", count)
    assert (result.full, result.verified, result.findings, len(opened)) == (False, 0, [], 2)


@pytest.mark.both_databases
def test_under_enforce_an_event_the_user_deleted_reappears_after_one_sweep(drift: Drift) -> None:
    account = drift.pipeline.account()
    event, external_id = drift.synced(account, title="Planning")
    drift.policy("enforce")
    drift.sweep(account)  # the baseline: a cursor
    drift.pipeline.provider.user_delete(account, external_id)

    before = _counted("deleted_externally")
    result = drift.sweep(account)
    assert [(f.kind, f.action, f.event_id) for f in result.findings] == [("deleted_externally", "repaired", event)]
    assert _counted("deleted_externally") == (before[0] + 1, before[1] + 1)  # detected, and repaired
    reopened = drift.pipeline.target(event, account)
    assert (reopened.status, reopened.external_id, reopened.drift_kind) == ("pending", None, "deleted_externally")
    with drift.pipeline.worker():
        row = drift.pipeline.wait_target(event, account, "synced")
    [stored] = drift.pipeline.provider.events(account)
    assert (stored.status, stored.body["title"], row.external_id) == ("confirmed", "Planning", external_id)
    assert row.synced_version == 1 and row.external_etag == stored.etag
    assert drift.pipeline.outcomes().get("already_done", 0) == 0  # the repair was not swallowed by the version's key

    after = drift.sweep(account)  # the repair's own write, seen as calsync wrote it
    assert (after.findings, after.verified) == ([], 1)
    assert drift.pipeline.target(event, account).drift_kind is None


def test_under_enforce_an_edited_title_is_restored(drift: Drift) -> None:
    account = drift.pipeline.account()
    event, external_id = drift.synced(account, title="Planning")
    drift.policy("enforce")
    drift.sweep(account)
    drift.pipeline.provider.user_edit(account, external_id, title="Mine now")

    [finding] = drift.sweep(account).findings
    assert (finding.kind, finding.action, finding.external_id) == ("modified_externally", "repaired", external_id)
    with drift.pipeline.worker():
        drift.pipeline.wait_target(event, account, "synced")
    [stored] = drift.pipeline.provider.events(account)
    assert (stored.status, stored.body["title"]) == ("confirmed", "Planning")


def test_an_edit_of_a_field_calsync_does_not_own_is_no_drift(drift: Drift) -> None:
    account = drift.pipeline.account()
    _, external_id = drift.synced(account, title="Planning")
    drift.policy("enforce")
    drift.sweep(account)
    drift.pipeline.provider.user_edit(account, external_id, color="red")  # new etag, same owned fields
    assert drift.sweep(account).findings == []


def test_under_enforce_an_orphan_with_calsync_s_marker_is_deleted(drift: Drift) -> None:
    account = drift.pipeline.account()
    _event, external_id = drift.synced(account, title="Planning")
    drift.policy("enforce")
    ghost = EventState("ghost", "tenant-1", 1, "Left behind", FIELDS.start, FIELDS.end, "UTC", False)
    orphan = drift.pipeline.provider.upsert(memory_account(drift, account), ghost,
                                            Target("ghost", account, "tenant-1"))  # fmt: skip

    [finding] = drift.sweep(account).findings  # the first sweep: a full listing
    assert (finding.kind, finding.action, finding.external_id, finding.event_id) == (
        "unknown_item", "repaired", orphan.external_id, "ghost")  # fmt: skip
    by_id = {e.external_id: e.status for e in drift.pipeline.provider.events(account)}
    assert by_id == {orphan.external_id: "cancelled", external_id: "confirmed"}


@pytest.mark.both_databases
def test_under_report_a_deletion_is_recorded_and_notified_and_nothing_changes(drift: Drift, receiver: Receiver) -> None:
    account = drift.pipeline.account()
    event, external_id = drift.synced(account, title="Planning")
    drift.endpoint(receiver, "event.drifted")
    drift.sweep(account)  # report is the default policy
    drift.pipeline.provider.user_delete(account, external_id)

    before = _counted("deleted_externally")
    [finding] = drift.sweep(account).findings
    assert (finding.kind, finding.action) == ("deleted_externally", "reported")
    assert _counted("deleted_externally") == (before[0] + 1, before[1])  # detected, not repaired
    row = drift.pipeline.target(event, account)
    assert (row.status, row.external_id, row.drift_kind) == ("synced", external_id, "deleted_externally")
    with drift.pipeline.worker():
        wait_until(lambda: receiver.verified(), what="the event.drifted webhook")
    [delivered] = receiver.verified()
    assert delivered.payload["type"] == "event.drifted"
    assert {k: delivered.payload["data"][k] for k in ("tenant_id", "entity_id", "account_id", "external_id",
                                                      "status", "drift_kind", "version")} == {
        "tenant_id": "tenant-1", "entity_id": event, "account_id": account, "external_id": external_id,
        "status": "drifted", "drift_kind": "deleted_externally", "version": 1}  # fmt: skip
    assert [e.status for e in drift.pipeline.provider.events(account)] == ["cancelled"]  # not put back
    assert drift.sweep(account).findings == []  # reported once: the next changes do not mention it


def test_under_off_no_account_is_swept(drift: Drift) -> None:
    account = drift.pipeline.account()
    drift.synced(account, title="Planning")
    drift.policy("off")
    result = drift.sweep(account)
    assert result.skipped == "off"
    assert [c for c in drift.pipeline.provider.calls() if c.op == "read_back"] == []

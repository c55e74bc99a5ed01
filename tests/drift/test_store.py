"""The drift store on both backends: policies, findings' pages, the sweep-age and overdue figures, the claim that
keeps two workers from enqueueing one account's sweep, a target's verification, and pruning."""

from __future__ import annotations

import datetime as dt
import threading

import pytest
from sqlalchemy import func, select

from calsync.core.drift import store
from calsync.core.drift.store import Finding
from calsync.core.model.drift import DEFAULT_DRIFT_POLICY
from calsync.core.store import targets
from calsync.core.store.database import Database
from calsync.core.store.pruning import Retention, prune
from calsync.core.store.schema import drift_findings, drift_state, provider_accounts
from tests.drift.support import NOW, add_account, synced_event

pytestmark = pytest.mark.both_databases


def finding(kind: str = "missing", *, tenant: str = "t", at: dt.datetime = NOW) -> Finding:
    """A finding to record (its id is given by the store)."""
    return Finding(0, tenant, "a1", "e1", "x1", kind, "reported", at)  # type: ignore[arg-type]


def test_a_tenant_without_a_policy_has_the_default_and_setting_one_replaces_it(db: Database) -> None:
    with db.write() as conn:
        assert store.policy_of(conn, "t") == DEFAULT_DRIFT_POLICY == "report"
        store.set_policy(conn, "t", "enforce", now=NOW)
        store.set_policy(conn, "t", "off", now=NOW)
        store.set_policy(conn, "u", "enforce", now=NOW)
    with db.read() as conn:
        assert (store.policy_of(conn, "t"), store.policy_of(conn, "u")) == ("off", "enforce")
    with db.write() as conn, pytest.raises(ValueError, match="unknown drift policy"):
        store.set_policy(conn, "t", "sometimes", now=NOW)  # type: ignore[arg-type]


def test_findings_are_listed_by_id_in_keyset_pages_filtered_by_tenant_and_kind(db: Database) -> None:
    with db.write() as conn:
        made = store.record_findings(conn, [finding("missing"), finding("unknown_item"), finding(tenant="u"),
                                            finding("missing")])  # fmt: skip
    assert [f.id for f in made] == sorted({f.id for f in made})
    with db.read() as conn:
        first = store.list_findings(conn, tenant_id="t", kind=None, after_id=None, limit=2)
        rest = store.list_findings(conn, tenant_id="t", kind=None, after_id=first[-1].id, limit=10)
        missing = store.list_findings(conn, tenant_id=None, kind="missing", after_id=None, limit=10)
    assert [f.id for f in first + rest] == [made[0].id, made[1].id, made[3].id]
    assert [f.id for f in missing] == [made[0].id, made[2].id, made[3].id]
    assert first[0].as_json() == {"id": made[0].id, "tenant_id": "t", "account_id": "a1", "event_id": "e1",
                                   "external_id": "x1", "kind": "missing", "action": "reported",
                                   "found_at": NOW.isoformat()}  # fmt: skip


def test_a_claim_moves_the_next_sweep_forward_so_a_second_claim_gets_nothing(db: Database) -> None:
    add_account(db, "a1")
    add_account(db, "a2", tenant="off")
    add_account(db, "a3", status="disabled")
    with db.write() as conn:
        store.set_policy(conn, "off", "off", now=NOW)
        first = store.claim_due(conn, now=NOW, interval=300, providers={"memory"}, limit=10)
        again = store.claim_due(conn, now=NOW + dt.timedelta(seconds=299), interval=300, providers={"memory"},
                                limit=10)  # fmt: skip
        unread = store.claim_due(conn, now=NOW, interval=300, providers={"google"}, limit=10)
    assert (first, again, unread) == (["a1"], [], [])
    with db.write() as conn:
        later = store.claim_due(conn, now=NOW + dt.timedelta(seconds=300), interval=300, providers={"memory"},
                                limit=10)  # fmt: skip
        state = store.sweep_state(conn, "a1")
    assert later == ["a1"]
    assert state is not None and state.next_sweep_at == NOW + dt.timedelta(seconds=600)


def test_concurrent_claims_never_hand_out_one_account_twice(db: Database) -> None:
    for n in range(20):
        add_account(db, f"a{n:02}")
    with db.write() as conn:  # every account has its state, due now
        store.claim_due(conn, now=NOW - dt.timedelta(seconds=400), interval=300, providers={"memory"}, limit=100)
    claimed: list[list[str]] = []
    start = threading.Barrier(4)

    def claim() -> None:
        start.wait()
        for _ in range(5):
            with db.write() as conn:
                claimed.append(store.claim_due(conn, now=NOW, interval=300, providers={"memory"}, limit=3))

    workers = [threading.Thread(target=claim) for _ in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    ids = [account_id for batch in claimed for account_id in batch]
    assert sorted(ids) == [f"a{n:02}" for n in range(20)]  # each once, none left out


def test_sweep_age_and_overdue_count_only_accounts_owed_sweeps(db: Database) -> None:
    add_account(db, "a1")
    add_account(db, "a2")
    add_account(db, "a3", tenant="off")
    with db.write() as conn:
        assert store.oldest_sweep(conn) is None
        store.claim_due(conn, now=NOW, interval=300, providers={"memory"}, limit=10)
        store.set_policy(conn, "off", "off", now=NOW)
        store.record_sweep(conn, "a1", cursor="c1", now=NOW + dt.timedelta(seconds=5))
        store.record_sweep(conn, "a2", cursor=None, now=NOW + dt.timedelta(seconds=9))
        store.record_sweep(conn, "a3", cursor=None, now=NOW - dt.timedelta(days=3))  # its tenant turned drift off
        store.record_sweep_failure(conn, "a2")
    with db.read() as conn:
        assert store.oldest_sweep(conn) == NOW + dt.timedelta(seconds=5)
        due = NOW + dt.timedelta(seconds=300)  # the claim moved both to NOW + 300
        assert store.overdue_sweeps(conn, now=due + dt.timedelta(seconds=300)) == 0
        assert store.overdue_sweeps(conn, now=due + dt.timedelta(seconds=301)) == 2
        assert store.overdue_sweeps(conn, now=due + dt.timedelta(seconds=61), grace=60) == 2
        state = store.sweep_state(conn, "a2")
    assert state is not None and (state.cursor, state.failures) == (None, 1)


def test_a_sweep_after_failures_saves_its_cursor_and_time_and_clears_the_failures_but_not_when_it_is_due(
    db: Database,
) -> None:
    add_account(db, "a1")
    with db.write() as conn:
        store.claim_due(conn, now=NOW, interval=300, providers={"memory"}, limit=10)
        store.record_sweep(conn, "a1", cursor="c1", now=NOW)
        store.record_sweep_failure(conn, "a1")
        store.record_sweep_failure(conn, "a1")
        store.record_sweep(conn, "a1", cursor="c2", now=NOW + dt.timedelta(seconds=7))
    with db.read() as conn:
        state = store.sweep_state(conn, "a1")
    assert state is not None
    assert (state.cursor, state.swept_at, state.failures) == ("c2", NOW + dt.timedelta(seconds=7), 0)
    assert state.next_sweep_at == NOW + dt.timedelta(seconds=300)  # the claim's, kept


def test_removing_an_account_removes_its_sweep_state(db: Database) -> None:
    add_account(db, "a1")
    with db.write() as conn:
        store.claim_due(conn, now=NOW, interval=300, providers={"memory"}, limit=10)
        conn.execute(provider_accounts.delete())
    with db.read() as conn:
        assert conn.execute(select(func.count()).select_from(drift_state)).scalar_one() == 0


def test_a_target_shows_when_it_was_verified_and_what_was_found(db: Database) -> None:
    add_account(db, "a1")
    (key,) = synced_event(db, "e1", ["a1"])
    with db.write() as conn:
        store.mark_verified(conn, [(key, "modified_externally")], now=NOW)
    with db.read() as conn:
        row = targets.get_target(conn, key)
    assert row is not None and (row.verified_at, row.drift_kind) == (NOW, "modified_externally")
    shown = row.as_json()
    assert (shown["verified_at"], shown["drift_kind"]) == (NOW.isoformat(), "modified_externally")


def test_housekeeping_prunes_findings_after_their_retention(db: Database) -> None:
    old, recent = NOW - dt.timedelta(days=31), NOW - dt.timedelta(days=29)
    with db.write() as conn:
        store.record_findings(conn, [finding(at=old) for _ in range(5)] + [finding(at=recent)])
    retention = Retention(batch=2, max_batches=10, dead_letters=0, cancelled_events=0, drift_findings=30 * 86400)
    report = prune(db, retention, now=NOW)
    assert report.purged["drift_findings"] == 5
    with db.read() as conn:
        assert conn.execute(select(drift_findings.c.found_at)).scalars().all() == [recent]
    kept = prune(db, Retention(batch=2, max_batches=10, dead_letters=0, cancelled_events=0), now=NOW + 10 * (NOW - old))
    assert kept.purged["drift_findings"] == 0


def test_a_repair_reopens_only_the_target_as_compared_and_its_record_counts_once(db: Database) -> None:
    add_account(db, "a1")
    (key,) = synced_event(db, "e1", ["a1"])
    with db.write() as conn:
        assert not store.reopen_for_repair(conn, key, external_id="x-other", version=1, kind="missing",
                                           forget_ref=True, now=NOW)  # fmt: skip
        assert not store.reopen_for_repair(conn, key, external_id="x-a1", version=2, kind="missing",
                                           forget_ref=True, now=NOW)  # fmt: skip
        # Without a repair, the version synced already is not recorded again (the compare-and-set).
        assert not targets.record_synced(conn, key, version=1, external_id="x-new", etag=None, final_status="synced")
        assert store.reopen_for_repair(conn, key, external_id="x-a1", version=1, kind="missing", forget_ref=True,
                                       now=NOW)  # fmt: skip
        reopened = targets.get_target(conn, key)
        assert reopened is not None
        assert (reopened.status, reopened.external_id, reopened.external_etag) == ("pending", None, None)
        assert not store.reopen_for_repair(conn, key, external_id="x-a1", version=1, kind="missing",
                                           forget_ref=True, now=NOW)  # fmt: skip  # pending now: not twice
        assert targets.record_synced(conn, key, version=1, external_id="x-new", etag='"2"', final_status="synced")
        assert not targets.record_synced(conn, key, version=1, external_id="x-3", etag=None, final_status="synced")
        row = targets.get_target(conn, key)
    assert row is not None and (row.status, row.external_id, row.synced_version) == ("synced", "x-new", 1)


def test_a_modified_target_keeps_its_provider_id_when_reopened(db: Database) -> None:
    add_account(db, "a1")
    (key,) = synced_event(db, "e1", ["a1"])
    with db.write() as conn:
        assert store.reopen_for_repair(conn, key, external_id="x-a1", version=1, kind="modified_externally",
                                       forget_ref=False, now=NOW)  # fmt: skip
        row = targets.get_target(conn, key)
    assert row is not None and (row.status, row.external_id, row.external_etag) == ("pending", "x-a1", '"1"')


def test_an_account_s_targets_are_read_by_id_or_all_at_once_past_the_lookup_limit(db: Database) -> None:
    add_account(db, "a1")
    for n in range(3):
        synced_event(db, f"e{n}", ["a1"])
    with db.read() as conn:
        one = store.account_targets(conn, "a1", event_ids={"e0"}, external_ids=["x-none"])
        some = store.account_targets(conn, "a1", event_ids=set(), external_ids=["x-a1"])
        none = store.account_targets(conn, "a1", event_ids=set(), external_ids=[])
        many = store.account_targets(conn, "a1", event_ids={f"z{n}" for n in range(501)}, external_ids=[])
        every = store.account_targets(conn, "a1", event_ids=None)
    assert [t.event_id for t, _ in one] == ["e0"]
    assert sorted(t.event_id for t, _ in some) == ["e0", "e1", "e2"]  # all three have the id x-a1
    assert none == [] and len(many) == len(every) == 3
    assert {event.id: event.version for _, event in every} == {"e0": 1, "e1": 1, "e2": 1}

"""The comparison of a sweep, property-tested: a read-back is the provider's answer (outside input), so Hypothesis
draws any mix of targets (settled or in flight) and items (as written, edited, removed, orphans, duplicates,
markers of another account), and the rules of core/drift/compare.py must hold for every one."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from calsync.core.drift.compare import Believed, Comparison, compare
from calsync.core.model.drift import ObservedItem, ReadBack

ACCOUNT = "acc"
SINCE = dt.datetime(2026, 12, 7, 17, tzinfo=dt.UTC)
BEFORE, AFTER = SINCE - dt.timedelta(seconds=5), SINCE + dt.timedelta(seconds=1)


def fingerprint_of(target: Believed) -> str:
    """What calsync would write for the target's event (the tests' adapter)."""
    return f"fp-{target.event_id}-v{target.event_version}"


@st.composite
def targets(draw: st.DrawFn) -> list[Believed]:
    """Targets of the account: settled ones and every kind of work in flight, provider ids unique."""
    count = draw(st.integers(0, 8))
    found = []
    for n in range(count):
        version = draw(st.integers(1, 3))
        found.append(
            Believed(
                tenant_id="t",
                event_id=f"e{n}",
                account_id=ACCOUNT,
                status=draw(st.sampled_from(["synced", "synced", "synced", "pending", "failed", "deleted"])),
                wanted=draw(st.sampled_from(["present", "present", "absent"])),
                external_id=draw(st.sampled_from([f"x{n}", f"x{n}", None])),
                etag=f'"{n}-{version}"',
                synced_version=version,
                event_version=version + draw(st.sampled_from([0, 0, 0, 1])),
                updated_at=draw(st.sampled_from([BEFORE, BEFORE, AFTER])),
            )
        )
    return found


def settled(t: Believed) -> bool:
    """The rule, spelled out here again: synced, wanted, with an id, at its event's version, not written since."""
    return (t.status, t.wanted) == ("synced", "present") and t.external_id is not None and (
        t.synced_version >= t.event_version and t.updated_at < SINCE)  # fmt: skip


def as_written(target: Believed) -> ObservedItem:
    """The item exactly as calsync's last write left it."""
    assert target.external_id is not None
    return ObservedItem(target.external_id, target.sync_key, target.etag, fingerprint=fingerprint_of(target))


@st.composite
def readings(draw: st.DrawFn, believed: list[Believed]) -> ReadBack:
    """What the provider may answer: each target's item as written, touched, edited, removed or absent, plus
    orphans, duplicates and items marked for another account; a full listing or changes."""
    items = []
    for target in believed:
        if target.external_id is None:
            continue
        fate = draw(st.sampled_from(["as_written", "touched", "edited", "removed", "absent"]))
        item = as_written(target)
        if fate == "touched":  # a field calsync does not own: new etag, same fingerprint
            items.append(replace(item, etag='"other"'))
        elif fate == "edited":
            items.append(replace(item, etag='"other"', fingerprint="changed"))
        elif fate == "removed":
            items.append(ObservedItem(target.external_id, None, None, removed=True))
        elif fate == "as_written":
            items.append(item)
    for n in range(draw(st.integers(0, 3))):
        owner = draw(st.sampled_from([f"t:ghost{n}:{ACCOUNT}", f"t:e{n}:{ACCOUNT}", f"t:e{n}:elsewhere"]))
        items.append(ObservedItem(f"dup{n}", owner, '"d"', fingerprint="fp"))
    return ReadBack(draw(st.permutations(items)), "next", full=draw(st.booleans()))


@st.composite
def cases(draw: st.DrawFn) -> tuple[list[Believed], ReadBack]:
    """Targets and a read-back of them."""
    believed = draw(targets())
    return believed, draw(readings(believed))


def run(believed: list[Believed], reading: ReadBack, calls: list[str] | None = None) -> Comparison:
    """compare() with the tests' fingerprint, recording whose fingerprint it asked for."""

    def fingerprint(target: Believed) -> str:
        if calls is not None:
            calls.append(target.event_id)
        return fingerprint_of(target)

    return compare(believed, reading, account_id=ACCOUNT, since=SINCE, fingerprint=fingerprint)


@settings(max_examples=300, deadline=None)
@given(cases())
def test_work_in_flight_is_never_a_finding_and_each_target_is_judged_once(
    case: tuple[list[Believed], ReadBack],
) -> None:
    believed, reading = case
    calls: list[str] = []
    result = run(believed, reading, calls)
    judged = [d.target for d in result.drifts if d.target is not None] + result.verified
    assert all(settled(t) for t in judged)
    assert len({t.event_id for t in judged}) == len(judged)
    in_flight_items = {t.external_id for t in believed if not settled(t) and t.status != "deleted"}
    for drift in result.drifts:
        assert drift.kind != "missing" or reading.full
        if drift.kind == "unknown_item":
            assert drift.item is not None and drift.item.sync_key is not None
            assert drift.item.sync_key.endswith(f":{ACCOUNT}") and not drift.item.removed
            assert drift.external_id not in in_flight_items
            owner = next((t for t in believed if t.sync_key == drift.item.sync_key), None)
            assert owner is None or settled(owner) or owner.status == "deleted"
    # A fingerprint is computed only for a settled target whose item came back with another etag.
    other_etag = {i.external_id for i in reading.items if not i.removed and i.etag == '"other"'}
    assert all(next(t for t in believed if t.event_id == e).external_id in other_etag for e in calls)


@settings(max_examples=200, deadline=None)
@given(targets())
def test_a_full_listing_of_what_calsync_wrote_verifies_every_settled_target(believed: list[Believed]) -> None:
    items = [as_written(t) for t in believed if t.external_id is not None and t.status != "deleted"]
    result = compare(believed, ReadBack(items, "c", full=True), account_id=ACCOUNT, since=SINCE,
                     fingerprint=fingerprint_of)  # fmt: skip
    assert result.drifts == []
    assert sorted(t.event_id for t in result.verified) == sorted(t.event_id for t in believed if settled(t))


@settings(max_examples=200, deadline=None)
@given(targets(), st.data())
def test_each_change_to_a_settled_target_s_item_is_its_finding(believed: list[Believed], data: st.DataObject) -> None:
    judged = [t for t in believed if settled(t)]
    fates = {t.event_id: data.draw(st.sampled_from(["removed", "edited", "absent", "touched"])) for t in judged}
    items = []
    for target in judged:
        item, fate = as_written(target), fates[target.event_id]
        if fate == "removed":
            items.append(ObservedItem(item.external_id, None, None, removed=True))
        elif fate in ("edited", "touched"):
            items.append(replace(item, etag='"other"', fingerprint="changed" if fate == "edited" else item.fingerprint))
    full = data.draw(st.booleans())
    result = compare(believed, ReadBack(items, "c", full=full), account_id=ACCOUNT, since=SINCE,
                     fingerprint=fingerprint_of)  # fmt: skip
    expected = {"removed": "deleted_externally", "edited": "modified_externally", "absent": "missing"}
    found = {d.target.event_id: d.kind for d in result.drifts if d.target is not None}
    assert found == {e: expected[f] for e, f in fates.items() if f in expected and (f != "absent" or full)}
    assert {t.event_id for t in result.verified} == {e for e, f in fates.items() if f == "touched"}


@settings(max_examples=100, deadline=None)
@given(cases())
def test_the_order_of_the_items_does_not_matter(case: tuple[list[Believed], ReadBack]) -> None:
    believed, reading = case

    def summary(found: Comparison) -> tuple[list[tuple[str, str]], list[str]]:
        return sorted((d.kind, d.external_id) for d in found.drifts), sorted(t.event_id for t in found.verified)

    backward = replace(reading, items=list(reversed(reading.items)))
    assert summary(run(believed, reading)) == summary(run(believed, backward))


def test_a_marker_of_another_account_or_a_removed_orphan_is_never_a_finding() -> None:
    reading = ReadBack([ObservedItem("a", "t:e1:elsewhere", '"1"', fingerprint="f"),
                        ObservedItem("b", f"t:e2:{ACCOUNT}", None, removed=True)], "c", full=True)  # fmt: skip
    assert compare([], reading, account_id=ACCOUNT, since=SINCE, fingerprint=fingerprint_of).drifts == []


def test_an_item_calsync_deleted_that_is_back_is_an_orphan_and_one_being_deleted_is_not() -> None:
    deleted = Believed("t", "e1", ACCOUNT, "deleted", "absent", "x1", '"1"', 1, 1, BEFORE)
    item = ObservedItem("x1", deleted.sync_key, '"1"', fingerprint="f")
    reading = ReadBack([item], "c", full=False)
    [orphan] = compare([deleted], reading, account_id=ACCOUNT, since=SINCE, fingerprint=fingerprint_of).drifts
    assert (orphan.kind, orphan.external_id) == ("unknown_item", "x1")
    deleting = replace(deleted, status="pending")
    assert compare([deleting], reading, account_id=ACCOUNT, since=SINCE, fingerprint=fingerprint_of).drifts == []

"""The operation planner: (target state, change) → (operation, idempotency key), with no store or broker."""

from __future__ import annotations

import pytest

from calsync.core.model.calendar import Target
from calsync.core.model.payload import Operation
from calsync.core.model.planner import operation_for, plan

IDS = ("t", "e", "a")
KEY = "calendar:t:e:a"


def _target(*, external_id: str | None, synced_version: int) -> Target:
    return Target(event_id="e", account_id="a", tenant_id="t", external_id=external_id, synced_version=synced_version)


NEVER_SYNCED = _target(external_id=None, synced_version=0)
SYNCED = _target(external_id="ext-1", synced_version=3)
# A delete recorded before the provider ever named the event: a sync spent the create key, yet no id is known.
SYNCED_WITHOUT_ID = _target(external_id=None, synced_version=2)


NEW, LOST = False, True  # a change just submitted (producer) / a job presumed lost (reconciler)


@pytest.mark.parametrize(
    ("case", "jobs", "target", "version", "wanted_present", "cancelled", "expected"),
    [
        ("no target yet: the one create", NEW, None, 1, True, False, ("create", f"{KEY}:create")),
        ("no target, event already cancelled", NEW, None, 2, True, True, ("delete", f"{KEY}:delete:v2")),
        ("planned, no external id yet: its create job may hold the key", NEW, NEVER_SYNCED, 2, True, False,
         ("update", f"{KEY}:update:v2")),
        ("has an external id: an edit", NEW, SYNCED, 4, True, False, ("update", f"{KEY}:update:v4")),
        ("synced once, no external id", NEW, SYNCED_WITHOUT_ID, 5, True, False, ("update", f"{KEY}:update:v5")),
        ("account removed from the event", NEW, SYNCED, 4, False, False, ("delete", f"{KEY}:delete:v4")),
        ("account removed before its first sync", NEW, NEVER_SYNCED, 2, False, False,
         ("delete", f"{KEY}:delete:v2")),
        ("event cancelled", NEW, SYNCED, 5, True, True, ("delete", f"{KEY}:delete:v5")),
        ("event cancelled and account removed", NEW, SYNCED, 5, False, True, ("delete", f"{KEY}:delete:v5")),
        ("account added back after its delete", NEW, SYNCED, 6, True, False, ("update", f"{KEY}:update:v6")),
        ("create lost before any sync: the create key is still free", LOST, NEVER_SYNCED, 1, True, False,
         ("create", f"{KEY}:create")),
        ("create lost, event edited since", LOST, NEVER_SYNCED, 3, True, False, ("create", f"{KEY}:create")),
        ("lost, but a sync spent the create key", LOST, SYNCED_WITHOUT_ID, 3, True, False,
         ("update", f"{KEY}:update:v3")),
        ("update lost", LOST, SYNCED, 4, True, False, ("update", f"{KEY}:update:v4")),
        ("removal lost", LOST, SYNCED, 4, False, False, ("delete", f"{KEY}:delete:v4")),
        ("cancellation lost", LOST, NEVER_SYNCED, 2, True, True, ("delete", f"{KEY}:delete:v2")),
    ],
)  # fmt: skip
def test_a_job_is_planned_from_the_target_state_and_the_change(
    case: str,
    jobs: bool,
    target: Target | None,
    version: int,
    wanted_present: bool,
    cancelled: bool,
    expected: tuple[Operation, str],
) -> None:
    planned = plan(target, IDS, version=version, wanted_present=wanted_present, cancelled=cancelled,
                   trace_id="trace", earlier_jobs_lost=jobs)  # fmt: skip
    assert (planned.operation, planned.idempotency_key) == expected, case
    assert (planned.target_version, planned.attempt, planned.trace_id) == (version, 1, "trace")


@pytest.mark.parametrize(
    ("case", "target", "wanted_present", "cancelled", "expected"),
    [
        ("nothing at the provider yet", NEVER_SYNCED, True, False, "create"),
        ("no target row at all", None, True, False, "create"),
        ("synced but the provider never named it", SYNCED_WITHOUT_ID, True, False, "create"),
        ("the provider has it", SYNCED, True, False, "update"),
        ("account removed", SYNCED, False, False, "delete"),
        ("event cancelled", SYNCED, True, True, "delete"),
        ("event cancelled before its create", NEVER_SYNCED, True, True, "delete"),
    ],
)
def test_the_operation_follows_the_latest_state_not_the_job_label(
    case: str, target: Target | None, wanted_present: bool, cancelled: bool, expected: Operation
) -> None:
    assert operation_for(target, wanted_present=wanted_present, cancelled=cancelled) == expected, case


def test_an_identical_resubmit_plans_the_same_key() -> None:
    first = plan(SYNCED, IDS, version=4, wanted_present=True, cancelled=False, trace_id="trace")
    again = plan(SYNCED, IDS, version=4, wanted_present=True, cancelled=False, trace_id="trace")
    later = plan(SYNCED, IDS, version=5, wanted_present=True, cancelled=False, trace_id="trace")
    assert (first.operation, first.idempotency_key) == (again.operation, again.idempotency_key)
    assert first.job_id != again.job_id  # each a job of its own: the dedup markers tell them apart
    assert later.idempotency_key != first.idempotency_key


def test_a_create_key_names_no_version_so_every_version_shares_it() -> None:
    first = plan(None, IDS, version=1, wanted_present=True, cancelled=False, trace_id="trace")
    lost = plan(
        NEVER_SYNCED, IDS, version=7, wanted_present=True, cancelled=False, trace_id="t", earlier_jobs_lost=True
    )
    assert first.idempotency_key == lost.idempotency_key

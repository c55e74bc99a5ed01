"""The invariants a chaos run checks, as pure functions of what it gathered (no Redis, no database, no provider).

What calsync promises under any mix of faults, crashes and outages (docs/ARCHITECTURE.md, "Life of a job"):

- **no lost change**: every target's latest accepted version is what the provider shows, or the target has an
  open dead letter (an operator's to replay);
- **no duplicate effect**: per target at most one create, no version applied twice, one event at the provider;
- **no regression**: the versions applied to a target strictly rise (an old version never overwrites a newer);
- **every dead letter complete**: a job's record carries a payload that parses, so it can be replayed; a
  quarantined message's record carries its whole body;
- **replay converges**: with the faults off and the dead letters replayed, every target shows its latest
  version (the first invariant without the dead-letter exemption).

Each check returns one line per violation; an empty list means it holds.
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from calsync.core.model.errors import InvalidPayload
from calsync.core.model.payload import SYNC_JOB, parse_payload

Invariant = Literal[
    "no lost change", "no duplicate effect", "no regression", "every dead letter complete", "replay converges"
]
INVARIANTS: tuple[Invariant, ...] = get_args(Invariant)

#: What the provider's call log says a write did to a target that counts as an effect (the memory provider's
#: words; an emulator's log is put in them): "adopted" and "unchanged" wrote nothing.
EFFECTS = frozenset({"created", "updated", "restored"})


@dataclass(frozen=True, order=True)
class TargetId:
    """One (account, event) pair, as both calsync and the provider can name it."""

    account_id: str
    entity_id: str

    def __str__(self) -> str:
        return f"{self.account_id}/{self.entity_id}"


@dataclass(frozen=True)
class Applied:
    """One write the provider applied to a target, in the order applied: its effect and the version it carried."""

    target: TargetId
    effect: str
    version: int


@dataclass(frozen=True)
class Shown:
    """What the provider shows of a target at the end: the version and title of its live event, and how many
    live events it holds for the target (more than one is a duplicate create)."""

    target: TargetId
    version: int | None
    title: str | None
    copies: int = 1


@dataclass(frozen=True)
class Accepted:
    """A target's latest accepted change: the event's version in calsync's database and the title sent with it."""

    target: TargetId
    version: int
    title: str


@dataclass(frozen=True)
class Letter:
    """One open dead letter, as stored."""

    id: int
    kind: str  # a DeadLetterKind: "job", "quarantined", "webhook"
    job_type: str
    target: TargetId | None
    payload: Any
    raw_complete: bool  # a quarantined record's stored body is whole (nothing for the other kinds)


@dataclass
class Verdict:
    """The violations of each invariant checked; ``holds`` when there are none."""

    violations: dict[Invariant, list[str]] = field(default_factory=dict)

    @property
    def holds(self) -> bool:
        """Every invariant checked holds."""
        return not any(self.violations.values())


def lost_changes(accepted: Iterable[Accepted], shown: Mapping[TargetId, Shown], letters: Iterable[Letter]) -> list[str]:
    """Targets whose latest accepted version the provider does not show, and which no open dead letter covers."""
    excused = {letter.target for letter in letters}
    found = []
    for change in sorted(accepted, key=lambda a: a.target):
        seen = shown.get(change.target)
        if change.target in excused or (seen is not None and (seen.version, seen.title) == (change.version,
                                                                                            change.title)):  # fmt: skip
            continue
        have = "nothing" if seen is None else f"v{seen.version} {seen.title!r}"
        found.append(f"{change.target}: accepted v{change.version} {change.title!r}, the provider shows {have}")
    return found


def duplicate_effects(applied: Iterable[Applied], shown: Mapping[TargetId, Shown]) -> list[str]:
    """Targets created more than once, versions applied twice, targets with more than one event at the provider."""
    found = []
    for target, writes in sorted(_by_target(applied).items()):
        creates = sum(1 for write in writes if write.effect == "created")
        if creates > 1:
            found.append(f"{target}: created {creates} times")
        twice = sorted(version for version, n in Counter(write.version for write in writes).items() if n > 1)
        if twice:
            found.append(f"{target}: version(s) {twice} applied more than once")
    found += [f"{seen.target}: {seen.copies} events at the provider" for seen in shown.values() if seen.copies > 1]
    return found


def regressions(applied: Iterable[Applied]) -> list[str]:
    """Targets that were given an older version after a newer one."""
    found = []
    for target, writes in sorted(_by_target(applied).items()):
        versions = [write.version for write in writes]
        for earlier, later in itertools.pairwise(versions):
            if later < earlier:
                found.append(f"{target}: v{later} applied after v{earlier} (applied in order: {versions})")
                break
    return found


def incomplete_letters(letters: Iterable[Letter]) -> list[str]:
    """Dead letters a replay could not run: a job's without a payload that parses, a quarantined message's body
    cut short."""
    found = []
    for letter in letters:
        if letter.kind == "quarantined":
            if not letter.raw_complete:
                found.append(f"dead letter {letter.id}: the quarantined message's body is incomplete")
            continue
        if letter.job_type != SYNC_JOB:
            continue  # the intake's and the webhooks' records carry their own documents; the load makes none
        try:
            parse_payload([letter.payload])  # stored as the message's one argument
        except InvalidPayload as exc:
            found.append(f"dead letter {letter.id} ({letter.target}): its payload does not parse: {exc}")
    return found


def check(accepted: list[Accepted], applied: list[Applied], shown: Mapping[TargetId, Shown],
          letters: list[Letter]) -> Verdict:  # fmt: skip
    """The first four invariants, after the load and the faults, before any replay."""
    return Verdict({
        "no lost change": lost_changes(accepted, shown, letters),
        "no duplicate effect": duplicate_effects(applied, shown),
        "no regression": regressions(applied),
        "every dead letter complete": incomplete_letters(letters),
    })  # fmt: skip


def converged(accepted: list[Accepted], shown: Mapping[TargetId, Shown]) -> list[str]:
    """After the replay: the targets whose latest accepted version the provider still does not show."""
    return lost_changes(accepted, shown, ())


def _by_target(applied: Iterable[Applied]) -> dict[TargetId, list[Applied]]:
    writes: dict[TargetId, list[Applied]] = defaultdict(list)
    for write in applied:
        if write.effect in EFFECTS:
            writes[write.target].append(write)
    return writes

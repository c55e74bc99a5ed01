"""``calsync dlq``: list, show, replay and discard dead-lettered jobs and quarantined messages."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import click

from calsync.actors.cli.shell import CliState, pass_state, print_json, print_list, progress
from calsync.core.model.errors import EntityNotFound, InvalidChange
from calsync.core.model.vocabulary import DEAD_LETTER_KINDS
from calsync.core.producer import dead_letters as ops
from calsync.core.store import dead_letters as repo
from calsync.core.store.dead_letters import DeadLetter, DeadLetterFilter

_FILTERS = (
    click.option("--tenant", "tenant_id", help="Only this tenant."),
    click.option("--account", "account_id", help="Only this account."),
    click.option("--entity", "entity_id", help="Only this event."),
    click.option("--reason", help='Only this reason, e.g. "needs re-authorization".'),
    click.option("--error-class", help="Only this error class, e.g. AuthRevoked."),
    click.option("--job-type", help="Only this job type."),
    click.option(
        "--kind",
        type=click.Choice(DEAD_LETTER_KINDS),
        help="Only failed jobs, or only quarantined messages (bytes that were no runnable message).",
    ),
)


def _filter_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    return functools.reduce(lambda decorated, option: option(decorated), reversed(_FILTERS), fn)


def _flt(status: str | None, **given: Any) -> DeadLetterFilter:
    return DeadLetterFilter(status=None if status == "all" else status, **given)  # type: ignore[arg-type]


@click.group("dlq")
def dlq() -> None:
    """Dead-letter queue: jobs that failed for good, and quarantined messages that were never runnable."""


@dlq.command("list")
@_filter_options
@click.option(
    "--status", type=click.Choice(["open", "replayed", "discarded", "all"]), default="open", show_default=True
)
@click.option("--limit", type=click.IntRange(1), default=1000, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_state
def list_(state: CliState, /, status: str, limit: int, as_json: bool, **given: Any) -> None:
    """List dead letters, oldest failure first."""
    with state.clients.db.read() as conn:
        found = repo.find(conn, _flt(status, **given), limit=limit)
    columns = ["id", "kind", "status", "failed at", "reason", "tenant", "entity", "account", "attempts", "last error"]
    rows = [
        (r.id, r.kind, r.status, r.failed_at, r.reason, r.tenant_id, r.entity_id, r.account_id, r.attempts,
         (r.last_error or "")[:80])
        for r in found
    ]  # fmt: skip
    print_list(as_json, found, "dead letters", columns, rows)


def _get(state: CliState, record_ids: tuple[int, ...]) -> list[DeadLetter]:
    # Every named record, or bad input naming all the missing ones (nothing is done then).
    with state.clients.db.read() as conn:
        found = {rid: repo.get(conn, rid) for rid in dict.fromkeys(record_ids)}
    missing = [str(rid) for rid, record in found.items() if record is None]
    if missing:
        raise EntityNotFound(f"dead letter{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
                             f"do{'' if len(missing) > 1 else 'es'} not exist")  # fmt: skip
    return [record for record in found.values() if record is not None]


@dlq.command("show")
@click.argument("record_id", type=int)
@click.option("--json", "as_json", is_flag=True, help="Print JSON (the default output is JSON too).")
@pass_state
def show(state: CliState, record_id: int, as_json: bool) -> None:
    """Show one record with its payload and error history (a quarantined body as base64 and as escaped text)."""
    print_json(_get(state, (record_id,))[0].as_json())


@dlq.command("replay")
@click.argument("record_ids", type=int, nargs=-1)
@_filter_options
@click.option("--all", "replay_all", is_flag=True, help="Replay every open record (no other filter needed).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (the default output is JSON too).")
@pass_state
def replay(state: CliState, /, record_ids: tuple[int, ...], replay_all: bool, as_json: bool, **given: Any) -> None:
    """Re-enqueue records (by id or by filter) after fixing the cause; idempotency stays enforced.

    Prints {"replayed": [{"id", "job_id"}], "skipped": [{"id", "job_id", "why"}]}. Exit 0 even when
    nothing matched or every record was skipped (the reasons are in "skipped"); exit 2 when a named
    id does not exist (nothing is replayed then).
    """
    filtered = any(v is not None for v in given.values())
    if record_ids and (filtered or replay_all):
        raise InvalidChange("give record ids or filters, not both")
    if not record_ids and not filtered and not replay_all:
        raise InvalidChange("nothing selected: give record ids, a filter such as --account, or --all")
    if record_ids:
        records = _get(state, record_ids)
    else:
        with state.clients.db.read() as conn:
            records = repo.find(conn, _flt("open", **given))
    with progress("replaying", len(records)) as advance:
        report = ops.replay(state.clients, records, on_progress=lambda _record: advance(1))
    print_json(report.model_dump(exclude_defaults=True))


@dlq.command("purge-quarantined")
@click.option("--reason", help='Only this reason, e.g. "quarantined: not JSON".')
@click.option("--note", help="Why the records are dropped (kept on the records).")
@pass_state
def purge_quarantined(state: CliState, reason: str | None, note: str | None) -> None:
    """Discard every open quarantined message (of one reason, if given).

    Prints {"discarded": [{"id", "job_id"}], "skipped": [{"id", "job_id", "why"}]}; exit 0 even when none matched.
    """
    print_json(ops.purge_quarantined(state.clients, reason=reason, note=note).model_dump())


@dlq.command("discard")
@click.argument("record_ids", type=int, nargs=-1, required=True)
@click.option("--note", help="Why the records are dropped (kept on the record).")
@pass_state
def discard(state: CliState, record_ids: tuple[int, ...], note: str | None) -> None:
    """Close records without replaying them.

    Prints {"discarded": [{"id", "job_id"}], "skipped": [{"id", "job_id", "why"}]} (a record no longer open
    is skipped, exit 0); exit 2 when a named id does not exist (nothing is discarded then).
    """
    print_json(ops.discard_records(state.clients, _get(state, record_ids), note=note).model_dump())

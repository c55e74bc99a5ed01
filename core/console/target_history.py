"""What happened to an event's targets, for its console page: its dead letters (each with its error history), the
drift sweeps' findings about it, and the audit rows about its targets, newest first, at most ``limit`` of each.

Each is one range of an index of migration 0014: ``ix_dead_letters_event``, ``ix_drift_findings_event`` and
``ix_audit_log_subject``. An audit row is about a target when its subject is :func:`target_subject` (the console's
cancel writes it so) or names one of the event's dead letters as :func:`dead_letter_subject` does.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from sqlalchemy import Connection, select

from calsync.core.drift.store import Finding
from calsync.core.store.audit import AuditEntry
from calsync.core.store.dead_letters import DeadLetter
from calsync.core.store.schema import audit_log as au
from calsync.core.store.schema import dead_letters as d
from calsync.core.store.schema import drift_findings as f
from calsync.core.store.targets import TargetKey


def target_subject(key: TargetKey) -> str:
    """How an audit row names a target it acted on: ``target <tenant>/<event>/<account>``."""
    return f"target {key.tenant_id}/{key.event_id}/{key.account_id}"


def dead_letter_subject(record_id: int) -> str:
    """How an audit row names one dead letter it acted on: ``dead letter <id>``."""
    return f"dead letter {record_id}"


@dataclass(frozen=True)
class History:
    """An event's dead letters, drift findings and audit rows, each newest first."""

    dead_letters: list[DeadLetter]
    findings: list[Finding]
    audit: list[AuditEntry]


def history(conn: Connection, keys: Collection[TargetKey], tenant_id: str, event_id: str, *, limit: int) -> History:
    """The history of the event ``event_id`` of ``tenant_id`` whose targets are ``keys``."""
    records_query = select(d).where(d.c.tenant_id == tenant_id, d.c.entity_id == event_id)
    records = [DeadLetter(**row) for row in conn.execute(records_query.order_by(d.c.id.desc()).limit(limit)).mappings()]
    findings_query = select(f).where(f.c.tenant_id == tenant_id, f.c.event_id == event_id)
    findings = [Finding(**row) for row in conn.execute(findings_query.order_by(f.c.id.desc()).limit(limit)).mappings()]
    subjects = [target_subject(key) for key in keys] + [dead_letter_subject(record.id) for record in records]
    audit_query = select(au.c.id, au.c.at, au.c.actor, au.c.action, au.c.subject, au.c.count, au.c.detail)
    about = audit_query.where(au.c.subject.in_(subjects)).order_by(au.c.id.desc()).limit(limit)
    audit = [AuditEntry(*row) for row in conn.execute(about)] if subjects else []
    return History(records, findings, audit)

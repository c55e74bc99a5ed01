"""Dead letters for the console's tests, written straight to the store, and what the console's pages show of them."""

from __future__ import annotations

import datetime as dt
import html
import re
from dataclasses import replace
from typing import Any

import httpx

from calsync.core.model.payload import SYNC_JOB, new_payload
from calsync.core.store import audit, dead_letters
from calsync.core.store.audit import AuditEntry
from calsync.core.store.dead_letters import DeadLetter, DeadLetterRecord
from calsync.core.store.schema import dead_letters as table
from tests.support import Pipeline

_ROW_ID = re.compile(r'<tr class="dead-letter">\s*<th scope="row"><a href="[^"]*">(\d+)</a>')
_OLDER = re.compile(r'<a rel="next" href="([^"]+)">')


def record(tenant: str = "tenant-1", account: str = "acc-1", entity: str = "evt-1", **changes: Any) -> DeadLetterRecord:
    """A sync job's dead letter whose payload a replay accepts (``changes``: any field, e.g. ``last_error``)."""
    payload = new_payload(tenant_id=tenant, entity_id=entity, account_id=account, operation="create", version=1,
                          trace_id="trace-console", key=f"calendar:{tenant}:{entity}:{account}:create")  # fmt: skip
    now = dt.datetime.now(dt.UTC)
    made = DeadLetterRecord(
        job_id=payload.job_id, job_type=SYNC_JOB, message_id=None, queue="calendar", tenant_id=tenant,
        entity_id=entity, account_id=account, idempotency_key=payload.idempotency_key, trace_id="trace-console",
        payload=payload.model_dump(mode="json"), attempts=3, reason="forbidden", error_class="Forbidden",
        last_error="refused by the provider", error_history=[], first_failed_at=now, failed_at=now,
    )  # fmt: skip
    return replace(made, **changes)


def store(pipeline: Pipeline, *records: DeadLetterRecord) -> list[int]:
    """Insert ``records`` in one transaction; their ids, in order."""
    db = pipeline.clients.db
    with db.write() as conn:
        for one in records:
            dead_letters.insert(db, conn, one)
        rows = conn.execute(table.select().where(table.c.job_id.in_([r.job_id for r in records]))).mappings()
        ids = {row["job_id"]: row["id"] for row in rows}
    return [ids[r.job_id] for r in records]


def stored(pipeline: Pipeline, record_id: int) -> DeadLetter:
    """A record as stored now."""
    with pipeline.clients.db.read() as conn:
        found = dead_letters.get(conn, record_id)
    assert found is not None
    return found


def listed(http: httpx.Client, **query: str) -> list[int]:
    """The ids the dead-letter list shows for ``query``, every page followed through its "Older" link."""
    ids: list[int] = []
    answer = http.get("/dead-letters", params=query)
    while True:
        assert answer.status_code == 200, answer.text
        ids += [int(i) for i in _ROW_ID.findall(answer.text)]
        older = _OLDER.search(answer.text)
        if older is None:
            return ids
        answer = http.get(html.unescape(older.group(1)))


def element(page: str, element_id: str) -> str:
    """The text inside the ``<pre>`` or other single element with ``element_id``, unescaped as a browser shows it."""
    found = re.search(rf'id="{element_id}"[^>]*>(.*?)</', page, re.DOTALL)
    assert found is not None, f"no #{element_id} on the page"
    return html.unescape(found.group(1))


def signed_in_as(page: str) -> str:
    """The name of the operator a console page was shown to (what the audit log records as the actor)."""
    found = re.search(r'id="who">([^<]+?)\s*<small>', page)
    assert found is not None, "the page shows no signed-in operator"
    return html.unescape(found.group(1))


def dead_letter_audit(pipeline: Pipeline) -> list[AuditEntry]:
    """The audit log's dead-letter actions, newest first (signing in is audited too)."""
    with pipeline.clients.db.read() as conn:
        return [entry for entry in audit.page(conn) if entry.action.startswith("dead_letters.")]

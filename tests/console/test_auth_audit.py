"""The audit log page: every action newest first, a keyset "Older →" link, one operator's when filtered."""

from __future__ import annotations

import html
import re

from calsync.core.store import audit
from tests.api.live import LiveApi
from tests.console.conftest import ConsoleClient

_ROW = re.compile(r'<tr class="audit">.*?</tr>', re.S)
_OLDER = re.compile(r'<a href="([^"]+)" rel="next">Older')


def _subjects(page: str) -> list[str]:
    return [m for row in _ROW.findall(page) for m in re.findall(r"<td>(subject-\d+)</td>", row)]


def test_pages_run_newest_first_and_older_pages_follow_by_id(served: LiveApi, console_client: ConsoleClient) -> None:
    viewer = console_client("viewer")  # signing in is the oldest action
    with served.db.write() as conn:
        for n in range(120):
            actor = "ann" if n % 2 == 0 else "ben"
            audit.record(conn, actor=actor, action="test.act", subject=f"subject-{n}", count=n)
    first = viewer.get("/audit")
    assert first.status_code == 200
    assert _subjects(first.text) == [f"subject-{n}" for n in range(119, 69, -1)]
    link = _OLDER.search(first.text)
    assert link is not None
    with served.db.write() as conn:  # a new action does not shift the next page
        audit.record(conn, actor="ann", action="test.act", subject="subject-999", count=1)
    second = viewer.get("/audit" + html.unescape(link.group(1)))
    assert _subjects(second.text) == [f"subject-{n}" for n in range(69, 19, -1)]
    third_link = _OLDER.search(second.text)
    assert third_link is not None
    third = viewer.get("/audit" + html.unescape(third_link.group(1)))
    assert _subjects(third.text) == [f"subject-{n}" for n in range(19, -1, -1)]
    assert _OLDER.search(third.text) is None

    anns = viewer.get("/audit", params={"actor": "ann"})
    assert _subjects(anns.text) == ["subject-999", *[f"subject-{n}" for n in range(118, 21, -2)]]
    older = _OLDER.search(anns.text)
    assert older is not None and "actor=ann" in html.unescape(older.group(1))
    rest = viewer.get("/audit" + html.unescape(older.group(1)))
    assert _subjects(rest.text) == [f"subject-{n}" for n in range(20, -1, -2)]


def test_what_the_database_would_refuse_is_a_clear_refusal_not_a_500(
    served: LiveApi, console_client: ConsoleClient
) -> None:
    viewer = console_client("viewer")
    nul = viewer.get("/audit", params={"actor": "ann\x00"})
    huge = viewer.get("/audit", params={"before": str(2**40)})
    assert nul.status_code == 400 and "actor must be printable text" in nul.text
    assert huge.status_code == 422
    assert viewer.get("/audit", params={"actor": "cli:root@host"}).status_code == 200

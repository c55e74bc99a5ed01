"""The accounts page: every tenant's accounts with status, breaker, newest error and outstanding targets, filters and
keyset pages; operators disable and enable (audited), viewers see no buttons and are refused."""

from __future__ import annotations

import html
import re
import time

import httpx
import pytest

from calsync.core.console.pages import accounts as accounts_page
from calsync.core.store import accounts, audit
from tests.console.conftest import ConsoleClient, form_token
from tests.console.paging import every_page
from tests.support import Pipeline, stored_dead_letter

_ROW = re.compile(r'<tr class="account" data-account="([^"]+)">(.*?)</tr>', re.S)
_CELL = re.compile(r"<t[hd][^>]*>(.*?)</t[hd]>", re.S)
COLUMNS = ("account", "tenant", "provider", "status", "breaker", "pending", "failed", "last error")


def _rows(page: str) -> dict[str, dict[str, str]]:
    """Each listed account's cells' text by column, by account id, in the page's order."""

    def words(cell: str) -> str:
        return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", cell)).split())

    return {account: dict(zip(COLUMNS, map(words, _CELL.findall(cells)), strict=False))
            for account, cells in _ROW.findall(page)}  # fmt: skip


def _status(pipeline: Pipeline, account_id: str) -> str:
    with pipeline.clients.db.read() as conn:
        summary = accounts.get_summary(conn, account_id)
    assert summary is not None
    return summary.status


def test_accounts_show_status_breaker_last_error_and_outstanding_targets(
    console_client: ConsoleClient, pipeline: Pipeline
) -> None:
    failing, calm = pipeline.account(account_id="acc-failing"), pipeline.account("tenant-2", "acc-calm")
    reauth = pipeline.account(account_id="acc-reauth")
    with pipeline.clients.db.write() as conn:
        accounts.update_account(conn, reauth, status="needs_reauth")
    stored_dead_letter(pipeline, "tenant-1", failing, "evt-old", error="older error")
    stored_dead_letter(pipeline, "tenant-1", failing, "evt-new", error="quota exceeded for calendar")
    pipeline.submit([failing], entity_id="evt-pending")  # no worker runs: its target stays pending
    open_until_ms = int(time.time() * 1000) + 60_000
    pipeline.clients.redis.zadd(pipeline.clients.keys.traffic_open_accounts("memory"), {failing: open_until_ms})
    page_html = console_client("viewer").get("/accounts").text
    rows = _rows(page_html)
    assert list(rows) == sorted([failing, calm, reauth])
    assert rows[failing]["breaker"] == "open" and rows[failing]["status"] == "active"
    assert rows[failing]["last error"].startswith("quota exceeded for calendar")
    assert (rows[failing]["pending"], rows[failing]["failed"]) == ("3", "0")  # the two dead letters' and the new one
    assert rows[calm]["breaker"] == "closed" and rows[calm]["tenant"] == "tenant-2" and rows[calm]["last error"] == "—"
    assert rows[reauth]["status"] == "needs_reauth needs re-authorization"
    assert "button" not in page_html.split('id="accounts"')[1]  # a viewer sees no action


def test_filters_and_keyset_pages(
    console_client: ConsoleClient, pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(5):
        pipeline.account("tenant-1" if i % 2 else "tenant-2", f"acc-{i}")
    with pipeline.clients.db.write() as conn:
        accounts.update_account(conn, "acc-3", status="disabled")
    client = console_client("viewer")
    assert list(_rows(client.get("/accounts", params={"tenant_id": "tenant-1"}).text)) == ["acc-1", "acc-3"]
    assert list(_rows(client.get("/accounts", params={"status": "disabled", "provider": "memory"}).text)) == ["acc-3"]
    assert client.get("/accounts", params={"status": "asleep"}).status_code == 400
    monkeypatch.setattr(accounts_page, "PAGE_SIZE", 2)
    seen = every_page(client, "/accounts", "tenant_id=", lambda page: list(_rows(page)))
    assert seen == [f"acc-{i}" for i in range(5)]


def _accounts_audit(pipeline: Pipeline) -> list[audit.AuditEntry]:
    """The audit log's entries of account actions, newest first (a sign-in is audited too)."""
    with pipeline.clients.db.read() as conn:
        return [entry for entry in audit.page(conn) if entry.action.startswith("accounts.")]


def _act(client: httpx.Client, account_id: str, verb: str) -> httpx.Response:
    """Post the account's action with the CSRF token of the accounts page (its sign-out form's, for a viewer)."""
    csrf = form_token(client.get("/accounts").text)
    return client.post(f"/accounts/{account_id}/{verb}", data={"csrf_token": csrf})


def test_an_operator_disables_and_enables_an_account_and_each_is_audited(
    console_client: ConsoleClient, pipeline: Pipeline
) -> None:
    account = pipeline.account(account_id="acc-1")
    client = console_client("operator")
    listed = client.get("/accounts").text
    assert 'class="disable' in listed and 'class="enable' not in listed
    who = re.search(r'<span id="who">([^<]+?)\s*<small>', listed).group(1)  # type: ignore[union-attr]
    disabled = _act(client, account, "disable")
    assert disabled.status_code == 303 and _status(pipeline, account) == "disabled"
    shown = client.get(disabled.headers["location"]).text
    assert 'id="done"' in shown and "disabled" in shown and 'class="enable' in shown
    again = _act(client, account, "disable")
    assert again.status_code == 303 and "already" in client.get(again.headers["location"]).text
    assert client.get("/accounts", params={"done": "Your key expired: sign in at evil.example"}).text.count("evil") == 0
    assert _act(client, account, "enable").status_code == 303 and _status(pipeline, account) == "active"
    log = _accounts_audit(pipeline)
    assert [(e.action, e.count, e.actor) for e in log] == [
        ("accounts.enable", 1, who),
        ("accounts.disable", 0, who),
        ("accounts.disable", 1, who),
    ]
    assert log[0].subject == "account acc-1" and log[0].detail == {"tenant_id": "tenant-1", "status": "active"}


def test_a_viewer_cannot_act_and_an_action_the_status_forbids_is_a_conflict(
    console_client: ConsoleClient, pipeline: Pipeline
) -> None:
    account, removing = pipeline.account(account_id="acc-1"), pipeline.account(account_id="acc-removing")
    with pipeline.clients.db.write() as conn:
        accounts.update_account(conn, removing, status="removing")
    viewer = console_client("viewer")
    assert _act(viewer, account, "disable").status_code == 403  # with the viewer's own CSRF token
    assert _status(pipeline, account) == "active"
    operator = console_client("operator")
    conflict = _act(operator, removing, "disable")
    assert conflict.status_code == 409 and "removing" in conflict.text and "<h1>409</h1>" in conflict.text
    assert _act(operator, "acc-none", "enable").status_code == 404
    assert _accounts_audit(pipeline) == []  # nothing changed, nothing recorded

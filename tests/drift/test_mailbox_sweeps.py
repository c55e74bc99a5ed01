"""Drift sweeps over the mailbox adapters end to end: drift-core's sweep, the real pipeline, and the Graph adapter
(httpx + msal) or the EWS adapter (exchangelib) against the Exchange server emulator.

For each: an event the user deleted reappears and an edited title is restored within one sweep under enforce, an
orphan carrying calsync's marker is deleted, report changes nothing, an expired delta token / SyncState leads to one
full listing without duplicates, an unchanged calendar costs one request, and a 503 during the sweep fails it with a
temporary error and no finding. The sweep itself (core/drift) is merged separately: without it these tests skip.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

pytest.importorskip("calsync.core.drift.sweep", reason="the drift sweep (core/drift, issue 34) is not merged here")

from calsync.core.model.calendar import EventState, ProviderName, Target
from calsync.core.model.errors import ProviderUnavailable
from calsync.core.store import accounts
from calsync.core.store.crypto import generate_key
from calsync_emulators.control import GraphControl
from calsync_emulators.graph.tls import TlsIdentity
from calsync_emulators.server import RunningEmulator
from tests.drift.conftest import Drift
from tests.integration.provider_support import TENANT, add_account
from tests.providers.exchange.ews_support import LOGINS

pytestmark = [pytest.mark.integration, pytest.mark.parametrize("provider", ["graph", "exchange"])]
MAILBOX = "alpha@example.com"


@dataclass(frozen=True)
class Mailbox:
    """A drift pipeline whose adapters point at the Exchange server emulator, an account on it, the emulator."""

    drift: Drift
    account: str
    graph: GraphControl


@pytest.fixture
def mailbox(
    drift_factory: Callable[..., Drift],
    stamped_exchange_server: RunningEmulator,
    emulator_tls: TlsIdentity,
    provider: ProviderName,
) -> Mailbox:
    """The account of ``provider`` (Graph, or EWS over the same emulator), in a fresh pipeline and mailbox."""
    graph = GraphControl(stamped_exchange_server.url)
    graph.reset()
    drift = drift_factory(secret_key=generate_key(), graph_api_endpoint=graph.api_endpoint,
                          graph_ca_file=emulator_tls.ca_file)  # fmt: skip
    if provider == "graph":
        account = add_account(drift.pipeline, "graph", MAILBOX, graph.app_credentials(), account_id="acc-g")
    else:
        options = {"server_url": graph.server_url, "auth_type": "basic", "access_type": "impersonation"}
        account = add_account(drift.pipeline, "exchange", MAILBOX, LOGINS["svc"], options, account_id="acc-e")
    return Mailbox(drift, account, graph)


def _items(graph: GraphControl) -> dict[str, dict[str, Any]]:
    return {str(i["subject"]): i for i in graph.items(MAILBOX)}


def test_under_enforce_a_deleted_event_reappears_an_edited_one_is_restored_an_orphan_goes(
    mailbox: Mailbox, provider: ProviderName
) -> None:
    drift, account, graph = mailbox.drift, mailbox.account, mailbox.graph
    planning, _ = drift.synced(account, title="Planning")
    review, _ = drift.synced(account, title="Review")
    drift.policy("enforce")
    assert drift.sweep(account).verified == 2
    with drift.pipeline.clients.db.read() as conn:
        loaded = accounts.load_account(conn, account, drift.pipeline.clients.cipher)
    assert loaded is not None
    # An orphan: calsync's marker for this account, written through the adapter, with no target behind it.
    ghost = EventState(id="evt-ghost", tenant_id=TENANT, version=1, title="Ghost", start=dt.datetime(2030, 1, 1, 9),
                       end=dt.datetime(2030, 1, 1, 10), time_zone="UTC", all_day=False)  # fmt: skip
    drift.pipeline.app.providers.get(provider).upsert(loaded, ghost, Target("evt-ghost", account, TENANT))
    items = _items(graph)
    graph.control("DELETE", f"items/{items['Planning']['ews_id']}")
    graph.control("PATCH", f"items/{items['Review']['ews_id']}", {"subject": "Mine now"})

    found = drift.sweep(account).findings
    kinds = ["deleted_externally", "modified_externally", "unknown_item"]
    assert sorted((f.kind, f.action) for f in found) == [(kind, "repaired") for kind in kinds]
    with drift.pipeline.worker():
        drift.pipeline.wait_target(planning, account, "synced")
        drift.pipeline.wait_target(review, account, "synced")
    assert sorted(_items(graph)) == ["Planning", "Review"]
    assert drift.sweep(account).findings == []


def test_report_changes_nothing(mailbox: Mailbox) -> None:
    drift, account, graph = mailbox.drift, mailbox.account, mailbox.graph
    drift.synced(account, title="Planning")
    drift.sweep(account)
    graph.control("PATCH", f"items/{_items(graph)['Planning']['ews_id']}", {"subject": "Mine now"})
    [finding] = drift.sweep(account).findings
    assert (finding.kind, finding.action) == ("modified_externally", "reported")
    assert sorted(_items(graph)) == ["Mine now"]


def test_an_expired_token_is_one_full_listing_an_unchanged_calendar_one_request_a_503_no_finding(
    mailbox: Mailbox, provider: ProviderName
) -> None:
    drift, account, graph = mailbox.drift, mailbox.account, mailbox.graph
    drift.synced(account, title="Planning")
    drift.sweep(account)
    since = len(graph.requests())
    assert drift.sweep(account).findings == []
    assert len(graph.requests()) - since == 1
    graph.expire_sync_states()
    full = drift.sweep(account)
    assert (full.full, full.findings, full.verified, len(graph.items(MAILBOX))) == (True, [], 1, 1)
    graph.add_fault(operation="events.delta" if provider == "graph" else "SyncFolderItems", status=503, times=1)
    with pytest.raises(ProviderUnavailable):
        drift.sweep(account)
    assert drift.findings() == [] and drift.sweep(account).findings == []

"""The three real adapters pointed at their emulators, with one account each: for the content tests."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from calsync.core.model.calendar import Account, ProviderName
from calsync.core.store.crypto import generate_key
from calsync_emulators.control import GoogleControl, GraphControl
from calsync_emulators.graph.tls import TlsIdentity
from calsync_emulators.server import RunningEmulator
from tests.providers.exchange.ews_support import LOGINS

#: The emulated mailboxes the Exchange (EWS) and the Graph account of these tests write to: one account per
#: mailbox and tenant (the same mailbox under both would show every event twice).
MAILBOX = "alpha@example.com"
GRAPH_MAILBOX = "bravo@example.com"
GOOGLE_CALENDAR = "alice@example.com"


@dataclass(frozen=True)
class Emulators:
    """The Google emulator and the Exchange server emulator (EWS and Graph over one store), both reset."""

    google: GoogleControl
    exchange: GraphControl
    tls: TlsIdentity

    def settings(self) -> dict[str, Any]:
        """The settings that point every adapter at these emulators."""
        return {"secret_key": generate_key(), "google_api_endpoint": self.google.api_endpoint,
                "graph_api_endpoint": self.exchange.api_endpoint, "graph_ca_file": self.tls.ca_file}  # fmt: skip

    def accounts(self, tenant: str) -> dict[ProviderName, Account]:
        """One account per real adapter (ids ``acc-<provider>``), as :class:`Account` values."""
        ews = {"server_url": self.exchange.server_url, "auth_type": "basic", "access_type": "impersonation"}
        made: list[tuple[ProviderName, str, dict[str, Any], dict[str, Any]]] = [
            ("google", GOOGLE_CALENDAR, self.google.user_credentials("1//content", "client", "secret"), {}),
            ("exchange", MAILBOX, dict(LOGINS["svc"]), ews),
            ("graph", GRAPH_MAILBOX, self.exchange.app_credentials(), {}),
        ]
        return {
            provider: Account(f"acc-{provider}", tenant, provider, address, credentials=credentials, options=options)
            for provider, address, credentials, options in made
        }


@pytest.fixture
def emulators(google_server: RunningEmulator, exchange_server: RunningEmulator, emulator_tls: TlsIdentity) -> Emulators:
    """The session's emulators, reset for this test."""
    google, exchange = GoogleControl(google_server.url), GraphControl(exchange_server.url)
    google.reset()
    exchange.reset()
    return Emulators(google, exchange, emulator_tls)


def requests_for_mailbox(emulators: Emulators) -> int:
    """How many EWS and Graph API requests (token calls left out) the Exchange server emulator answered."""
    return sum(1 for r in emulators.exchange.requests() if r["path"].startswith(("/EWS/", "/v1.0/")))

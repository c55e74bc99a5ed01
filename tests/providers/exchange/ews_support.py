"""Helpers shared by the Exchange tests: the emulator's logins, fixture-factory types, the rig, target bookkeeping."""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import Callable
from typing import Any

from calsync.core.model.calendar import Account, EventState, ExternalRef, Target
from calsync.providers.exchange.provider import ExchangeProvider
from calsync_emulators.control import EwsControl

# Logins of the emulator's DEFAULT_DIRECTORY: svc may impersonate anyone, alice only reaches her own mailbox.
LOGINS = {
    "svc": {"username": "svc@example.com", "password": "svc-password"},
    "alice": {"username": "alice@example.com", "password": "alice-password"},
}
TENANT = "example-tenant"
CLIENT = {"client_id": "calsync-client", "client_secret": "client-secret", "tenant_id": TENANT}

SOAP_PREFIX = """<?xml version="1.0" encoding="utf-8"?>
<s:Envelope xmlns:s="http://schemas.xmlsoap.org/soap/envelope/"
  xmlns:m="http://schemas.microsoft.com/exchange/services/2006/messages"
  xmlns:t="http://schemas.microsoft.com/exchange/services/2006/types">
<s:Header><t:RequestServerVersion Version="Exchange2016"/></s:Header>
<s:Body>"""


def basic(user: str, password: str) -> dict[str, str]:
    """Headers of a raw SOAP request with HTTP Basic credentials."""
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}", "Content-Type": "text/xml; charset=utf-8"}


MakeAccount = Callable[..., Account]
MakeEvent = Callable[..., EventState]
MakeTarget = Callable[..., Target]
MakeProvider = Callable[..., ExchangeProvider]


def target_for(account: Account, event: EventState, **changes: Any) -> Target:
    """The target row of an event in an account, optionally with a recorded external id / ChangeKey."""
    return Target(event_id=event.id, account_id=account.id, tenant_id=event.tenant_id, **changes)


def recorded(target: Target, ref: ExternalRef) -> Target:
    """The target as the pipeline stores it after a successful write."""
    return dataclasses.replace(target, external_id=ref.external_id, etag=ref.etag)


@dataclasses.dataclass(frozen=True)
class ExchangeRig:
    """What most adapter tests take: the adapter, the emulator's control API and the fixtures' factories."""

    provider: ExchangeProvider
    ews: EwsControl
    make_account: MakeAccount
    make_event: MakeEvent
    make_target: MakeTarget

    def triple(
        self, account: Account | None = None, event: EventState | None = None, **target: Any
    ) -> tuple[Account, EventState, Target]:
        """An account and an event (the factories' defaults unless given) and the event's target in that account."""
        account = self.make_account() if account is None else account
        event = self.make_event() if event is None else event
        return account, event, self.make_target(account, event, **target)

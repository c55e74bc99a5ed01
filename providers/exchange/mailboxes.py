"""Connected mailboxes: one exchangelib Account with its calendar folder per calsync account, built once.

exchangelib runs with ``FailFast`` (the queue owns retries: ``FaultTolerance`` would sleep in the worker
thread and share its back-off across every mailbox on a connection pool), ``Version(EXCHANGE_2016)``
(the API of 2016, 2019, SE and Online) and the configured ``auth_type``, so no probing requests are
sent; the pool holds one connection per worker thread and requests time out after the provider timeout.
A mailbox is rebuilt when its account's options or credentials change.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from exchangelib import UTC, Configuration, FailFast, Version
from exchangelib import Account as EwsAccount
from exchangelib.folders import Calendar, Root
from exchangelib.protocol import BaseProtocol
from exchangelib.version import EXCHANGE_2016

from calsync.core.model.calendar import Account
from calsync.core.model.provider_io import request_sent
from calsync.providers.exchange.account_config import AccountConfig
from calsync.providers.exchange.transport import CountingAdapter


@dataclass(frozen=True)
class ConnectedMailbox:
    """An exchangelib Account with its resolved calendar folder."""

    account: Any
    calendar: Any


def connect(account: Account, config: AccountConfig, *, max_connections: int, timeout: float) -> ConnectedMailbox:
    """The account's mailbox and calendar folder, on a protocol pinned to our pool size, timeout and FailFast."""
    BaseProtocol.HTTP_ADAPTER_CLS = CountingAdapter  # every session exchangelib opens from now on counts its requests
    ews_config = Configuration(
        service_endpoint=config.options.server_url,
        credentials=config.credentials(),
        auth_type=config.auth_type,
        version=Version(build=EXCHANGE_2016),
        retry_policy=FailFast(),
        max_connections=max_connections,
    )
    if config.options.autodiscover:
        request_sent()  # autodiscover asks DNS before its first (counted) HTTP request
    ews = EwsAccount(
        account.address,
        config=ews_config,
        autodiscover=config.options.autodiscover,
        access_type=config.access_type,
        default_timezone=UTC,
    )
    # Protocols are cached process-wide per (endpoint, credentials) and the first Configuration's pool size
    # and retry policy win, so pin them on the protocol itself (docs/notes/exchange.md, "Protocol cache").
    protocol = ews.protocol
    protocol.max_connections = max_connections
    protocol.TIMEOUT = timeout
    if not isinstance(protocol.retry_policy, FailFast):
        protocol.config.retry_policy = FailFast()
    # Not Account.calendar: its cached_property lock is one per process, so first use would serialize
    # every mailbox's GetFolder calls behind each other (docs/notes/exchange.md, "Folder lookup").
    calendar = Root.get_distinguished(account=ews).get_default_folder(Calendar)
    return ConnectedMailbox(ews, calendar)

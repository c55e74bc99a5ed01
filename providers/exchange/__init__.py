"""Exchange adapter: calendar items over EWS with exchangelib, safe to run twice for the same change.

Modules: ``provider`` (the adapter, :class:`ExchangeProvider`, and its idempotency rules),
``classification`` (the one table from exchangelib/EWS failures to calsync errors), ``items`` (local
state → calendar-item fields, the sync-key property, invitation modes), ``account_config`` (an
account's options and credentials, validated), ``mailboxes`` (connecting and caching mailboxes),
``config`` (what the adapter is configured with), ``transport`` (the requests adapter of exchangelib's
sessions: each request counted, the proxies read once). Library facts: docs/notes/exchange.md.

Deployments served: Exchange Server on-premises (2016, 2019 and Subscription Edition, which keep EWS)
and Exchange Online tenants that still allow EWS. Microsoft begins disabling EWS in Exchange Online on
1 Oct 2026; tenants that allow-list the app (``EWSEnabled=True`` + ``EWSAllowedAppIDs``) keep it until
the permanent shutdown on 1 Apr 2027. A blocked mailbox answers HTTP 403
(→ :class:`~calsync.core.model.errors.Forbidden`). Exchange Online mailboxes go through the ``graph``
adapter (providers/graph/), which reads and writes the same sync-key property.
"""

from calsync.core.model.markers import SYNC_KEY_PROPERTY_NAME, SYNC_KEY_PROPERTY_SET
from calsync.providers.exchange.account_config import AccountConfig, read_account_config
from calsync.providers.exchange.classification import CLASSIFICATION, Classification, classify_error
from calsync.providers.exchange.config import ExchangeConfig
from calsync.providers.exchange.items import SEND_MODES, item_fields
from calsync.providers.exchange.provider import ExchangeProvider

__all__ = [
    "CLASSIFICATION",
    "SEND_MODES",
    "SYNC_KEY_PROPERTY_NAME",
    "SYNC_KEY_PROPERTY_SET",
    "AccountConfig",
    "Classification",
    "ExchangeConfig",
    "ExchangeProvider",
    "classify_error",
    "item_fields",
    "read_account_config",
]

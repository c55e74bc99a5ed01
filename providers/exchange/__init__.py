"""Exchange adapter: calendar items over EWS with exchangelib, safe to run twice for the same change.

Modules: ``provider`` (the adapter, :class:`ExchangeProvider`, its idempotency rules and its mailboxes),
``classification`` (the one table from exchangelib/EWS failures to calsync errors), ``sync_items`` (the drift
read-back: SyncFolderItems, then GetItem for calsync's items), ``items`` (local
state → calendar-item fields, the sync-key property, invitation modes), ``account_config`` (an
account's options and credentials, validated), ``transport`` (the requests adapter of exchangelib's
sessions: each request counted, the proxies read once); the provider registry (providers/registry.py)
builds it from the settings. Library facts: docs/notes/exchange.md.

Deployments served: Exchange Server on-premises (2016, 2019 and Subscription Edition, which keep EWS)
and Exchange Online tenants that still allow EWS. Microsoft begins disabling EWS in Exchange Online on
1 Oct 2026; tenants that allow-list the app (``EWSEnabled=True`` + ``EWSAllowedAppIDs``) keep it until
the permanent shutdown on 1 Apr 2027. A blocked mailbox answers HTTP 403
(→ :class:`~calsync.core.model.errors.Forbidden`). Exchange Online mailboxes go through the ``graph``
adapter (providers/graph/), which reads and writes the same sync-key property.
"""

"""Microsoft Graph adapter: Exchange Online calendar events over Graph v1.0 with httpx (sync) and msal.

Modules: ``provider`` (the adapter, :class:`GraphProvider`, and its idempotency rules), ``classification``
(the one table from Graph/Entra/httpx failures to calsync errors), ``event_body`` (local state → event
resource, transactionId, the shared marker, invitations), ``credentials`` (the credentials JSON and
options, validated), ``tokens`` (msal apps and token caches per account), ``delta`` (the drift read-back:
calendarView delta, then the marker by id); the provider registry
(providers/registry.py) builds it from the settings.

Deployments served: Exchange Online (EWS is being switched off there from 1 Oct 2026; for good on
1 Apr 2027). Exchange Server on-premises keeps EWS: use the ``exchange`` adapter for it. Facts and
sources: docs/notes/exchange.md ("Microsoft Graph").
"""

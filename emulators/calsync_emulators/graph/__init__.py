"""A Microsoft Graph (v1.0 calendar events) + Entra emulator, over the same mailbox store as the EWS emulator.

:class:`ExchangeServer` is one "Exchange server" with two protocol front ends: ``/EWS/Exchange.asmx`` (the EWS
emulator) and ``/v1.0/`` (:mod:`.front`), plus Entra's token and discovery endpoints (:mod:`.entra`). An item
created over EWS is visible over Graph with the same extended property, and the other way round. Served with
a TLS context (:mod:`.tls`), the one port speaks http and https: msal insists on https authorities.

Point the Graph adapter at it with ``CALSYNC_GRAPH_API_ENDPOINT=https://127.0.0.1:P/v1.0/``,
``CALSYNC_GRAPH_CA_FILE=<the emulator's certificate>`` and credentials whose ``authority`` is
``https://127.0.0.1:P``. The EWS emulator's directory holds the apps (``calsync-client`` / ``client-secret`` of
tenant ``example-tenant``) and which mailboxes exist.

Control API (besides the shared routes and the EWS emulator's ``items``, ``directory``, ``tokens/revoke``,
``barriers``), JSON in and out:

- ``POST /_emulator/graph/refresh-tokens`` ``{"client_id", "user"}`` → ``{"refresh_token"}`` (a user consented);
- ``POST /_emulator/graph/revoke`` ``{"user"? , "refresh_token"?, "code"? (50173 | 700082 | 70043)}``: the
  user's refresh-token families are revoked; access tokens from them answer 401 at once;
- ``POST /_emulator/graph/secrets/expire`` ``{"client_id"}``: the app's secret expired (AADSTS7000222);
- ``POST /_emulator/graph/tokens/expire``: every access token expires now;
- ``PUT /_emulator/graph/policy`` ``{"client_id", "mailboxes": [..] | null}``: an application access policy;
- ``PUT /_emulator/graph/rest-disabled`` ``{"mailboxes": [..]}``: mailboxes without REST;
- ``GET /_emulator/graph/items[?mailbox=ADDR]``: the EWS ``items`` view with ``id`` = the Graph id and
  ``ews_id`` = the EWS ItemId (Graph ids are immutable ids, never equal to EWS ItemIds);
- ``GET /_emulator/graph/concurrency``: ``{"in_flight", "peak", "throttled", "limit"}`` per mailbox;
- ``GET|POST /_emulator/graph/config`` ``{"token_lifetime", "latency_ms", "mailbox_concurrency"}``
  (``latency_ms``: every Graph request takes that long while counted in flight);
- ``PATCH /_emulator/graph/items/{graph id}`` ``{"subject"?, "location"?, "body"?, "start"?, "end"?}`` and
  ``DELETE`` of it: the user edits or deletes the event in Outlook (a new changeKey and ``@odata.etag``;
  logged for delta and SyncFolderItems alike). ``POST /_emulator/sync-states/expire`` voids every delta
  token (the EWS routes).

Fault rules (:class:`ExchangeFaultRule`): on Graph requests ``operation`` is ``events.create``, ``events.list``,
``events.get``, ``events.update``, ``events.delete`` or ``events.delta`` (``calendarView/delta``, :mod:`.delta`),
``mailbox`` the addressed mailbox, ``reason`` a Graph error code (answered in Graph's body with ``status``,
``Retry-After`` from ``retry_after``); on the token endpoint ``operation`` is ``token``.
``after``/``drop``/``delay_ms``/``times`` work as for every emulator. Request log: Graph calls add
``operation``, ``mailbox``, ``principal``, ``code`` (errors), ``if_match``, ``transaction_id``, ``replayed``,
``notified``, and delta pages ``delta`` (``first``/``changes``), ``changes``, ``more``; token calls
``operation: "token"``, ``client_id``, ``grant``, ``outcome``.

:class:`calsync_emulators.control.GraphControl` is the typed client. Documented vs inferred: each module says.
"""

from __future__ import annotations

from calsync_emulators.graph.app import ExchangeFaultRule, ExchangeServer, create_app
from calsync_emulators.graph.entra import DEFAULT_TOKEN_LIFETIME, Entra
from calsync_emulators.graph.front import API_PREFIX, DEFAULT_MAILBOX_CONCURRENCY, GraphFrontEnd
from calsync_emulators.graph.tls import TlsIdentity, self_signed

__all__ = [
    "API_PREFIX",
    "DEFAULT_MAILBOX_CONCURRENCY",
    "DEFAULT_TOKEN_LIFETIME",
    "Entra",
    "ExchangeFaultRule",
    "ExchangeServer",
    "GraphFrontEnd",
    "TlsIdentity",
    "create_app",
    "self_signed",
]

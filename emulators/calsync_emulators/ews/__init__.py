"""An Exchange Web Services emulator: the SOAP subset exchangelib 5.x sends for calendar sync.

exchangelib configured with ``Version(build=EXCHANGE_2016)``, a fixed ``auth_type`` and
``autodiscover=False`` sends only GetFolder (root, calendar), CreateItem, FindItem, GetItem, UpdateItem,
DeleteItem and SyncFolderItems (plus ConvertId when it has to guess the version); that is what this server speaks, at
``POST /EWS/Exchange.asmx``. It keeps the quirks exchangelib was verified to depend on
(docs/notes/emulators.md, "EWS"): keep-alive HTTP/1.1 with Content-Length, SOAP faults with
``<detail>`` as HTTP 500 XML, item-level errors as ``ResponseClass="Error"``,
``TotalItemsInView``/``IncludesLastItemInRange`` on FindItem, the same ItemId back from UpdateItem, a
new ChangeKey on every change, and never a schema-version fault unless a fault rule asks for one.

Semantics
---------
- Items live per mailbox with ItemId + ChangeKey and the fields the client sent (stored as sent,
  returned by FindItem/GetItem when asked for), extended properties included.
- UpdateItem with a stale ChangeKey → ``ErrorIrresolvableConflict`` (no merging, even for
  ``AutoResolve``); unknown ItemId → ``ErrorItemNotFound``; undecodable ItemId →
  ``ErrorInvalidIdMalformed``; End before Start → ``ErrorCalendarEndDateIsEarlierThanStartDate``.
  DeleteItem ignores the ChangeKey, like Exchange.
- Auth: HTTP Basic against the directory's users, or OAuth2 bearer tokens from the client-credentials
  token endpoint ``POST /{tenant}/oauth2/v2.0/token`` (the Azure AD path, so ``token_url`` only swaps
  the host). Missing or wrong credentials → 401 with ``WWW-Authenticate`` (never ``Connection: close``).
  NTLM is not emulated: it binds auth to the TCP connection, which the shared server does not expose.
  :data:`DEFAULT_DIRECTORY` knows ``svc@example.com`` / ``svc-password`` (may impersonate and
  delegate-access every mailbox), ``alice@example.com`` / ``alice-password`` (her own mailbox only) and
  the app ``calsync-client`` / ``client-secret`` of tenant ``example-tenant``. oauthlib refuses plain
  HTTP unless ``OAUTHLIB_INSECURE_TRANSPORT=1`` is set in the client's environment.
- Access: with an ``ExchangeImpersonation`` header the caller acts as that mailbox and must hold the
  impersonation right (apps always do) or gets the SOAP fault ``ErrorImpersonateUserDenied``; an
  unknown impersonated mailbox gives the fault ``ErrorNonExistentMailbox``; an app token without the
  header gives the fault ``ErrorInvalidExchangeImpersonationHeaderData``. Without the header (delegate
  access) a user reaches its own mailbox and those in its ``delegate_for`` list (``"*"`` = all), else
  the item-level ``ErrorAccessDenied``.
- ``SyncFolderItems`` on the calendar folder (:mod:`.sync`): ``SyncState``, ``MaxChangesReturned``,
  ``IncludesLastItemInRange``, Create/Update/Delete changes from the mailbox's change log (:mod:`.mailbox`),
  ``ErrorInvalidSyncStateData`` for an invalid or expired state; the log adds ``sync`` (``full``,
  ``incremental`` or ``invalid``) and ``changes``.
- Meeting modes (``SendMeetingInvitations``, ``SendMeetingInvitationsOrCancellations``,
  ``SendMeetingCancellations``) are recorded in the request log with the attendees they would notify.

Control API (besides the shared routes of :mod:`calsync_emulators.server`)
-------------------------------------------------------------------------
- ``GET /_emulator/items[?mailbox=ADDR]``: items as JSON objects ``{"id", "change_key", "mailbox",
  "subject", "body", "location", "start", "end", "start_time_zone", "end_time_zone", "is_all_day",
  "required_attendees", "optional_attendees", "uid", "extended_properties": {name: value}}``
  (start/end exactly as the client sent them), in creation order.
- ``GET /_emulator/items/{id}``: one item (404 when unknown).
- ``PATCH /_emulator/items/{id}`` with ``{"subject"?, "location"?, "body"?, "start"?, "end"?}`` (times as
  xs:dateTime): a user edits the item in Outlook; its ChangeKey changes and the change is logged for
  SyncFolderItems and Graph delta (400 when the End would precede the Start).
- ``DELETE /_emulator/items/{id}``: a user deletes the item in Outlook (404 when unknown).
- ``GET /_emulator/directory`` / ``PUT /_emulator/directory``: who may log in and what they may reach,
  ``{"users": {name: {"password", "impersonation": bool, "delegate_for": [addr | "*"]}},
  "clients": {client_id: {"secret", "tenant"}}, "mailboxes": [addr] | null}`` (null: every address
  exists). :data:`DEFAULT_DIRECTORY` applies until replaced; reset restores the directory the app was
  created with.
- ``POST /_emulator/sync-states/expire``: every SyncState (and Graph delta token) issued so far is refused
  from now on, as when the server lost its sync data; ``PUT /_emulator/sync-states`` ``{"tombstone_limit"}``:
  how many deletions per mailbox the change log remembers (older states are refused; default 1000).
- ``POST /_emulator/tokens/revoke``: every issued bearer token stops working (the next EWS call gets 401).
- ``POST /_emulator/barriers`` with ``{"operation", "parties", "timeout_ms"}``: the next ``parties``
  requests for that SOAP operation wait for each other (up to ``timeout_ms``) before being served;
  their log entries say ``"barrier": "met"`` or ``"broken"``. It proves concurrency without timing.

Request log fields (``GET /_emulator/requests``)
-----------------------------------------------
SOAP calls add ``operation``, ``mailbox``, ``principal``, ``auth`` (``basic``/``bearer``/``rejected``),
``access`` (``delegate``/``impersonation``), ``response_codes`` (one per item), and per operation
``send_meeting_invitations`` (CreateItem), ``send_meeting_invitations_or_cancellations`` and
``conflict_resolution`` (UpdateItem), ``send_meeting_cancellations`` (DeleteItem), ``notified`` (the
attendees a sending mode reaches). Token calls add ``operation: "token"``, ``client_id``, ``outcome``.
A request broken by a fault rule is logged with ``operation``, ``mailbox`` and ``fault`` (rules fire
before authentication, like a front-end throttle) plus, with ``after``, what the applied request logged.

Fault rules (``POST /_emulator/faults``)
---------------------------------------
:class:`EwsFaultRule` adds to the shared rule: ``operation`` (SOAP operation, e.g. ``CreateItem``),
``mailbox`` (matched against ``X-AnchorMailbox``) and ``level``. With ``reason`` set (an EWS
ResponseCode), ``level: "item"`` (default) answers HTTP 200 with that code in every response message,
``level: "fault"`` answers a SOAP fault (HTTP ``status`` or 500) whose ``BackOffMilliseconds`` comes
from ``retry_after``. With only ``status``: a bare HTML error page (``Retry-After`` from
``retry_after``, ``Location`` on 3xx). On the token endpoint, ``reason`` is an OAuth error code
answered as JSON (status 400 unless given). ``delay_ms``, ``drop``, ``after``, ``times`` and
``probability`` work as for every emulator, e.g. ``{"operation": "CreateItem", "after": true,
"drop": true, "times": 1}`` loses the response of a create that happened.

:class:`calsync_emulators.control.EwsControl` is a typed client of all of this for tests and the demo.

Documented vs inferred: the operations, response shapes, error codes and access rules follow Exchange's
documentation and what exchangelib 5.x was observed to send and accept; each module says what it
simplifies or chooses. Layout: ``soap`` (wire format), ``directory`` (logins, tokens, access rules),
``mailbox`` (item store), ``views`` (ItemShape, restrictions), ``operations`` (the SOAP operations),
``barriers``, ``control_routes`` (the routes below ``/_emulator/`` of this emulator), ``app`` (wiring).
"""

from __future__ import annotations

from calsync_emulators.ews.app import EWS_PATH, EwsEmulator, EwsFaultRule, create_app
from calsync_emulators.ews.directory import DEFAULT_DIRECTORY, ClientSpec, Directory, UserSpec
from calsync_emulators.ews.soap import ERRORS_NS, MESSAGES_NS, SOAP_NS, TYPES_NS, soap_operation

__all__ = [
    "DEFAULT_DIRECTORY",
    "ERRORS_NS",
    "EWS_PATH",
    "MESSAGES_NS",
    "SOAP_NS",
    "TYPES_NS",
    "ClientSpec",
    "Directory",
    "EwsEmulator",
    "EwsFaultRule",
    "UserSpec",
    "create_app",
    "soap_operation",
]

"""A Google Calendar v3 emulator: the REST subset calsync uses, Google's wire shapes, and an OAuth token endpoint.

Point the real client at it with ``CALSYNC_GOOGLE_API_ENDPOINT=http://HOST:PORT/calendar/v3/`` and a
credentials JSON whose ``token_uri`` is ``http://HOST:PORT/token``; nothing else changes.

API (``/calendar/v3/calendars/{calendarId}/events[/{eventId}]``, segments percent-decoded one by one):

- ``POST`` insert, ``GET`` get/list, ``PUT`` update, ``PATCH`` patch (``null`` removes a key), ``DELETE``;
  ``POST .../events/watch`` (events.watch) and ``POST /calendar/v3/channels/stop`` (channels.stop);
- request bodies are checked against the discovery document's schemas: unknown fields are dropped (400 in
  strict mode), wrong JSON types answer 400 ``invalid`` (``schema``);
- a client-supplied id must match ``[a-v0-9]{5,1024}`` (400 ``invalid``); an id that exists, cancelled
  or not, answers 409 ``duplicate``; DELETE marks ``status: cancelled`` and keeps the event, a second DELETE
  answers 410 ``deleted``, an unknown id 404 ``notFound``; ``If-Match`` with a stale etag answers 412
  ``conditionNotMet``; ``If-None-Match`` with the current etag answers 304; PUT/PATCH of a cancelled event
  restores it or answers 403 (``deleted_writes``); cancelled events are reduced and forgotten on a schedule;
  ``sequence`` grows only on significant changes (``events``);
- times are stored as sent and answered in the request's ``timeZone``, the event's or the calendar's (``times``);
- list honours ``syncToken``/``nextSyncToken``, ``showDeleted``, ``updatedMin``, ``timeMin``/``timeMax``,
  ``iCalUID``, ``q``, ``orderBy``, ``singleEvents``, ``privateExtendedProperty``/``sharedExtendedProperty``,
  ``timeZone``, ``maxResults`` (default 250, at most 2500) and ``pageToken`` (``listing``), and answers only
  the fields a ``fields`` selection names, checked against the discovery schema (``partial``);
  ``showDeleted=true`` returns every stored event, so the real client can inspect the emulator's state;
- a watch channel gets a ``sync`` POST, then one ``exists`` POST per change, until stopped or expired
  (``channels``);
- every calendar id exists;
- errors are Google's documented ``{"error": {"code", "message", "errors": [{"domain", "reason", "message"}]}}``
  unless ``error_style`` (or a fault rule's ``style``) asks for another shape (``errors``);
- every API call needs ``Authorization: Bearer <token>`` issued by ``POST /token`` and not yet expired,
  else 401 ``authError``.

Token endpoint (``POST /token``, form-encoded):

- ``grant_type=refresh_token``: any client id/secret and any refresh token are accepted unless revoked;
- ``grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer``: the assertion must be a well-formed, unexpired
  RS256 JWT with ``iss``, ``scope``, ``aud``, ``iat`` and ``exp`` (the signature is not checked: the emulator
  has no public keys); ``sub`` is the delegated user;
- answers ``{"access_token", "expires_in", "token_type": "Bearer", "scope"}``; errors are
  ``{"error": "invalid_grant", "error_description": ...}`` (400). Token calls are logged with
  ``grant``, ``subject`` and ``scope`` (never a token); API calls with ``send_updates`` and ``if_match`` when
  the request carried ``sendUpdates`` / ``If-Match``.

Control API (JSON in and out):

- ``POST /_emulator/reset``: forget events, sync tokens, channels, tokens, revocations, faults, the log and
  every setting below;
- ``GET /_emulator/requests``: ``[{"method", "path", "status", ...}]`` in arrival order, API and token calls,
  ``path`` decoded, ``status`` null for a dropped connection;
- ``POST /_emulator/faults`` ``{"method", "path" (regex searched in the decoded path), "status", "reason",
  "message", "retry_after" (s), "delay_ms", "drop", "after" (apply the request, then break the answer),
  "times", "probability", "style", "query" (regex searched in the decoded ``name=value&...`` query)}``,
  all optional: the first matching rule wins, ``times`` counts down, ``probability`` tosses a coin (seeded by
  ``create_app(seed=...)``); ``GET`` lists the rules, ``DELETE`` clears them. A rule without ``path`` also
  hits ``/token``: give API faults a path such as ``/events``;
- ``"style"`` picks the error body (default: the emulator's ``error_style``): ``"documented"``, ``"status"``
  (adds ``status``), ``"details"`` (adds ``status`` and ``details[]`` of ``google.rpc.ErrorInfo``, which
  changes what ``HttpError.error_details`` returns), ``"status_only"`` (no ``errors[]``, like "insufficient
  authentication scopes") or ``"html"`` (a front-end error page). ``reason`` defaults per status
  (e.g. 403 ``forbidden``, 429 ``rateLimitExceeded``, 5xx ``backendError``); ``retry_after`` sets the
  ``Retry-After`` header. On ``/token`` a rule answers in the OAuth shape, with ``reason`` as the OAuth
  ``error`` (default ``server_error`` for 5xx, ``invalid_request`` otherwise);
- ``POST /_emulator/revoke`` ``{"refresh_token": ...}`` or ``{"client_email": ...}``: later grants for it
  answer 400 ``invalid_grant`` and the access tokens already issued for it stop working (401);
- ``POST /_emulator/tokens/expire``: every access token issued so far expires now (the next API call of
  each client gets a 401, which google-auth answers with a refresh);
- ``GET /_emulator/config`` / ``POST /_emulator/config`` ``{"token_lifetime": seconds, ...}``: lifetime of
  tokens issued from now on (0 makes every token expire at once) and the switches of
  :class:`~calsync_emulators.google.behaviour.GoogleBehaviour` (``error_style``, ``strict``,
  ``deleted_writes``, ``sync_token_lifetime``, ``cancelled_retention``, ``cancelled_forget_after``,
  ``calendar_time_zone``, ``page_limit``), any subset, all or none applied;
- ``GET /_emulator/notifications``: the push messages delivered so far (``channel``, ``state``, ``number``,
  the receiver's ``status``);
- ``PATCH /_emulator/calendars/{calendarId}/events/{eventId}`` (a JSON object merged like ``events.patch``,
  ``null`` removes a field) and ``DELETE`` of the same path: the event's owner edits or deletes it in
  Calendar's UI. Like an API write it gets a new etag, ``updated`` and change position (the next ``syncToken``
  list reports it, a deletion as the cancelled tombstone) and is pushed to watch channels; unlike one it needs
  no token, ignores ``If-Match`` and is not in the request log. Answers the event (200) or 204; 404 for an
  unknown id (and an edit of a cancelled one), 410 for a second delete, 400 for an edit Google would refuse.

Documented vs inferred: each module's docstring says per topic what Google documents and what is inferred
or chosen (``behaviour``, ``errors``, ``schema``, ``times``, ``events``, ``listing``, ``partial``, ``channels``,
``oauth``; sources in docs/notes/emulators.md). Layout: those modules plus ``control_routes`` (the routes
below ``/_emulator/`` of this emulator) and ``app`` (wiring and routing).
"""

from __future__ import annotations

from calsync_emulators.google.app import API_PREFIX, GoogleCalendarEmulator, GoogleFaultRule, create_app
from calsync_emulators.google.behaviour import GoogleBehaviour
from calsync_emulators.google.errors import ErrorStyle, google_error
from calsync_emulators.google.listing import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE
from calsync_emulators.google.oauth import DEFAULT_TOKEN_LIFETIME, JWT_BEARER, TOKEN_PATH

__all__ = [
    "API_PREFIX",
    "DEFAULT_PAGE_SIZE",
    "DEFAULT_TOKEN_LIFETIME",
    "JWT_BEARER",
    "MAX_PAGE_SIZE",
    "TOKEN_PATH",
    "ErrorStyle",
    "GoogleBehaviour",
    "GoogleCalendarEmulator",
    "GoogleFaultRule",
    "create_app",
    "google_error",
]

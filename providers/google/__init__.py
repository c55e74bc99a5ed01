"""Google Calendar adapter: makes a Calendar v3 calendar show an :class:`EventState`, on the real client library.

Modules: ``provider`` (the adapter, :class:`GoogleProvider`, and the per-thread ``Http`` counting the requests
it sends: core/model/provider_io.py), ``read_back`` (drift sweeps' listing and fingerprints: core/model/drift.py),
``classification`` (the one table of what is temporary and what is not),
``event_body`` (local state → event resource, deterministic ids), ``credentials`` (Google's credential JSON →
google-auth); the provider registry (providers/registry.py) builds it from the settings. The library facts
behind these choices are in docs/notes/google-calendar.md.

- One service object per adapter (static discovery, endpoint from ``CALSYNC_GOOGLE_API_ENDPOINT``) and
  one ``events`` resource per thread built from it once (building one costs ~2 ms), each call executed
  through an ``AuthorizedHttp`` over a per-thread ``httplib2.Http``: httplib2 is not
  thread-safe and a shared one hands threads each other's responses. That ``Http`` carries
  ``CALSYNC_PROVIDER_TIMEOUT``, so it bounds API calls and token refreshes alike.
- ``execute(num_retries=0)``: the queue owns retries; the client's own retry re-sends inserts and ignores
  Retry-After.
- Creates are idempotent: the event id is derived from ``target.sync_key`` and our keys live in
  ``extendedProperties.private``; a 409 ``duplicate`` means an earlier attempt (or a cancelled event) holds
  the id, so we adopt it and bring it to the wanted state (no write when it already shows it, times
  compared as instants), which also restores a cancelled event. When Google refuses to restore one (403),
  the event is re-created under the next generation of the deterministic id, so retries never duplicate.
- Updates send the full wanted state with ``If-Match`` of the last synced etag; on 412 we re-read, re-apply
  our state on top of what is there (keeping fields we don't manage) and retry, a bounded number of times.
- ``EventState.status`` is written as Google's ``status``: ``cancelled`` hides the event as a delete does, and
  a later upsert with ``confirmed`` restores it.
- Deletes treat 404 and 410 ``deleted`` as done (a 410 ``fullSyncRequired`` is not); without a recorded id
  they walk the generations.
- Drift sweeps read back with ``events.list(showDeleted=true)``, the full listing and the ``syncToken`` one
  being the same query, and keep the items carrying our marker (``privateExtendedProperty`` can neither ask
  for "has the key" nor be combined with ``syncToken``); a 410 leads to one full listing (``read_back``).
- Every failure goes through :data:`CLASSIFICATION`, which reads Google's ``errors[].reason`` (never
  ``error.status``).
"""

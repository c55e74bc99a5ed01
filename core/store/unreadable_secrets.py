"""Stored secrets a worker's keys cannot open: the job waits for a worker that can, and the worker says why.

A blob no configured key decrypts (:class:`~core.model.errors.SecretKeyMismatch`) is a configuration
problem of the worker (a wrong or missing ``CALSYNC_SECRET_KEY``), not of the job: dead-lettering it
would fail every job of the account, due retries of other changes included, and each would have to be
replayed once the key is fixed. So the job is held (:class:`~core.model.errors.CredentialsUnreadable`,
re-enqueued after :data:`HOLD_SECONDS`, no attempt used, never dead-lettered for it): once a worker
with the right key runs (the key fixed and the workers restarted, or another worker that has it), it
runs as if nothing happened. A worker that opens none of the stored secrets does not start at all
(core/store/key_rotation.py ``require_secret_key``); this covers the rest: an account whose credentials
were stored with another key, a webhook endpoint's secret likewise.

Each owner (an account, a webhook endpoint) is said at ERROR at most every :data:`SAY_EVERY` seconds
per process, with what to do; every held delivery's own line says ``deferred`` as for any hold.
"""

from __future__ import annotations

import logging
import threading
import time

from calsync.core.model.errors import CredentialsUnreadable

log = logging.getLogger(__name__)

#: How long a delivery whose secrets this worker cannot open waits before it runs again.
HOLD_SECONDS = 60.0
#: How often one owner's unreadable secrets are said again by one process.
SAY_EVERY = 600.0


class UnreadableSecrets:
    """The owners whose secrets this process could not open, and when it last said so."""

    def __init__(self) -> None:
        self._said: dict[str, float] = {}
        self._lock = threading.Lock()

    def held(self, owner: str, what: str) -> CredentialsUnreadable:
        """The hold for a delivery that needs ``owner``'s secrets (``what``: "account", "webhook endpoint")."""
        now = time.monotonic()
        with self._lock:
            last = self._said.get(owner)
            say = last is None or now - last >= SAY_EVERY
            if say:
                self._said[owner] = now
        if say:
            log.error(
                "stored secrets of %s %s cannot be decrypted with this worker's CALSYNC_SECRET_KEY (or "
                "CALSYNC_SECRET_KEYS): its jobs are held, each tried again every %.0f s without using an attempt, "
                "until a worker with the key they were stored with runs them; set that key (both, newest first, "
                "while rotating) and restart the workers, or store the secrets again with the current key",
                what, owner, HOLD_SECONDS,
                extra={"fields": {"owner": owner, "kind": what}},
            )  # fmt: skip
        message = f"{what} {owner}: stored secrets cannot be decrypted with this worker's secret keys"
        return CredentialsUnreadable(message, retry_after=HOLD_SECONDS)

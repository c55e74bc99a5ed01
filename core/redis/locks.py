"""Per-resource locks in Redis: owner token, TTL, renewal while held, release only by the owner.

The acquire script (``lock_acquire.lua``) takes a lock with ``SET key token NX PX ttl``; the release and extend
scripts act only while the token still matches, so a worker whose lock expired can never free (or extend)
someone else's. One renewer thread per process extends every held lock every TTL/3; a lock it fails to extend
is marked lost.

In a worker process the token also names its owner: the process' heartbeat key (core/worker/heartbeat.py),
recorded only if that key exists when the lock is taken. A lock found busy is taken over, in the same
script, when its recorded owner's heartbeat key is gone: that process has not beaten for ``HEARTBEAT_TTL``,
so it is dead (or stuck, and about to be restarted). A lock with no recorded owner waits for its TTL.
Operations stay idempotent regardless (the job checks its idempotency record under the lock), since a
paused holder can lose its lock while still running (docs/notes/locks.md).

A lock may come with a *handover* key: what its last holder left the locked resource as. Taking the lock
returns the handover's value and sets it to :data:`UNKNOWN` in the same script; a release that says what it
leaves sets it, one that does not know leaves it unknown. A job that read the resource before taking the
lock can then tell, without reading it again, whether any holder wrote since (docs/notes/locks.md,
"One read per job").

Every command is one waited round trip on the client's pool (acquire, release), sent once more after a dropped
connection (core/redis/scripts.py): an acquire sent twice finds its own token and is taken (its handover then
reads ``unknown``), a release sent twice answers "not ours" the second time (the lock is freed all the same).
"""

from __future__ import annotations

import itertools
import logging
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

import redis

from calsync.core.redis.periodic import start_repeating
from calsync.core.redis.scripts import LuaScript

log = logging.getLogger(__name__)

#: How long a handover is kept (s): far longer than one job holds a lock, short enough to bound the keys.
HANDOVER_TTL: Final = 3600
#: The handover's value while a holder has the lock, and after a release that did not know what it left
#: (written by ``lock_acquire.lua``).
UNKNOWN: Final = "unknown"


@dataclass
class OwnedLock:
    """A lock this process owns; ``lost`` turns true if renewal or release found it taken or expired."""

    key: str
    token: str
    lost: bool = False
    taken_over: bool = False  # from an owner whose heartbeat was gone
    handover: str | None = None  # the lock's handover key, when it keeps one
    # What the last holder left (UNKNOWN: a holder has it or did not say; '': none kept). None: no handover.
    handed_over: str | None = None


class LockManager:
    """Takes, renews and releases locks for one process."""

    def __init__(self, client: redis.Redis, *, ttl_seconds: float, owner: Callable[[], str] | None = None) -> None:
        self._client = client
        self._ttl_ms = int(ttl_seconds * 1000)
        # This process' heartbeat key, recorded in the locks it takes so they can be taken over once it is gone
        # (None: plain locks, held until they expire). A function: a forked worker process has its own key.
        self._owner = owner
        self._acquire = LuaScript(client, __package__, "lock_acquire.lua")
        self._release = LuaScript(client, __package__, "lock_release.lua")
        self._extend = LuaScript(client, __package__, "lock_extend.lua")
        # Tokens only need to be unique: a random per-process part and a counter make them so.
        self._nonce = secrets.token_hex(12)
        self._serial = itertools.count(1)
        self._held: dict[str, OwnedLock] = {}
        self._held_lock = threading.Lock()
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    def acquire(self, key: str, *, handover: str | None = None) -> OwnedLock | None:
        """Take the lock (or take it over from a dead owner), or return None if a live one holds it.

        With ``handover`` (the lock's handover key) the lock says what its last holder left, and says
        :data:`UNKNOWN` from now on. Without a heartbeat in this process the lock is plain: never taken over; it
        keeps a handover when given one (an operator's cancel, which writes outside a job: the next job then reads
        the target again under the lock).
        """
        owner = "" if self._owner is None else self._owner()  # '': never taken over (lock_acquire.lua)
        keys = [key, owner] if handover is None else [key, owner, handover]
        taken = self._acquire(keys, [f"{self._nonce}:{next(self._serial)}", self._ttl_ms, HANDOVER_TTL])
        if taken is None:
            return None
        handed_over = taken[2].decode() if handover is not None else None
        lock = OwnedLock(key, taken[0].decode(), taken_over=bool(taken[1]), handover=handover, handed_over=handed_over)
        if lock.taken_over:
            log.warning("lock taken over from a dead owner", extra={"fields": {"lock_key": key}})
        with self._held_lock:
            self._held[lock.token] = lock
            if self._renewer is None:
                self._renewer = start_repeating(
                    "calsync-lock-renewer",
                    self._stop,
                    self._ttl_ms / 3000,
                    self.renew_all,
                    log=log,
                    failure="lock renewal failed; will retry",
                    errors=(redis.RedisError,),
                )
        return lock

    def release(self, lock: OwnedLock, *, leaves: str | None = None) -> bool:
        """Free the lock if we still own it; False (and ``lost``) means it had expired or been taken over.

        ``leaves``: what the holder leaves the resource as, kept in the lock's handover (None: unknown).
        """
        with self._held_lock:
            self._held.pop(lock.token, None)
        keys = [lock.key] if lock.handover is None else [lock.key, lock.handover]
        released = self._release(keys, [lock.token, leaves or "", HANDOVER_TTL])  # the last two for a handover
        if not released:
            lock.lost = True
        return bool(released)

    def renew_all(self) -> None:
        """Extend every held lock once (the renewer thread calls this every TTL/3)."""
        with self._held_lock:
            held = list(self._held.values())
        if not held:
            return
        pipe = self._client.pipeline(transaction=False)
        for lock in held:
            self._extend([lock.key], [lock.token, self._ttl_ms], client=pipe)
        for lock, extended in zip(held, pipe.execute(), strict=True):
            with self._held_lock:
                released = lock.token not in self._held  # by its job while the renewal was on its way: no loss
            if not extended and not released:
                lock.lost = True
                log.warning("lock lost before release", extra={"fields": {"lock_key": lock.key}})

    def close(self) -> None:
        """Stop the renewer thread (held locks then expire by TTL)."""
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join(timeout=5)

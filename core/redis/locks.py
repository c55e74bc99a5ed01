"""Per-resource locks in Redis: owner token, TTL, renewal while held, release only by the owner.

``SET key token NX PX ttl`` takes a lock; small Lua scripts extend and release it only if the token
still matches, so a worker whose lock expired can never free (or extend) someone else's. One renewer
thread per process extends every held lock every TTL/3; a lock it fails to extend is marked lost.

In a worker process the token also names its owner: the process' heartbeat key (core/worker/heartbeat.py),
recorded only if that key exists when the lock is taken. A lock found busy is taken over, in the same
script, when its recorded owner's heartbeat key is gone: that process has not beaten for ``HEARTBEAT_TTL``,
so it is dead (or stuck, and about to be restarted). A lock with no recorded owner waits for its TTL.
Operations stay idempotent regardless (the job checks its idempotency record under the lock), since a
paused holder can lose its lock while still running (docs/notes/locks.md).

A lock may come with a *handover* key: what its last holder left the locked resource as. Taking the lock
returns the handover's value and sets it to ``held`` in the same script; a release that says what it
leaves sets it, one that does not know leaves ``held``. A job that read the resource before taking the
lock can then tell, without reading it again, whether any holder wrote since (docs/notes/locks.md,
"One read per job").
"""

from __future__ import annotations

import functools
import itertools
import logging
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

import redis

from calsync.core.redis.periodic import start_repeating
from calsync.core.redis.thread_connections import DROPPED, ThreadConnections, script_sha

log = logging.getLogger(__name__)

#: How long a handover is kept (s): far longer than one job holds a lock, short enough to bound the keys.
HANDOVER_TTL: Final = 3600
#: The handover's value while a holder has the lock, and after a release that did not know what it left.
HELD: Final = "held"
# KEYS: the lock (and its handover); ARGV: the token (and what the holder leaves, '' if unknown; the TTL in s).
_RELEASE = """
if redis.call('get', KEYS[1]) ~= ARGV[1] then return 0 end
if KEYS[2] and ARGV[2] ~= '' then redis.call('set', KEYS[2], ARGV[2], 'EX', ARGV[3]) end
return redis.call('del', KEYS[1])
"""
# KEYS: the lock, this process' heartbeat key (and the lock's handover); ARGV: the token's unique part, TTL in
# ms (and the handover's TTL in s). Returns the token set and 0 (taken) or 1 (taken over from a dead owner),
# and the handover's value before it was set to held ('' if there was none); or nil (busy).
_ACQUIRE = """
local owner = ''
if redis.call('exists', KEYS[2]) == 1 then owner = KEYS[2] end
local token = owner .. '|' .. ARGV[1]
local over = 0
if not redis.call('set', KEYS[1], token, 'NX', 'PX', ARGV[2]) then
  local holder = string.match(redis.call('get', KEYS[1]) or '', '^(.*)|')
  if holder == nil or holder == '' or redis.call('exists', holder) == 1 then return nil end
  redis.call('set', KEYS[1], token, 'PX', ARGV[2])
  over = 1
end
if not KEYS[3] then return {token, over} end
local left = redis.call('get', KEYS[3]) or ''
redis.call('set', KEYS[3], 'held', 'EX', ARGV[3])
return {token, over, left}
"""
_EXTEND = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) end
return 0
"""


@dataclass
class HeldLock:
    """A lock this process holds; ``lost`` turns true if renewal found it taken or expired."""

    key: str
    token: str
    lost: bool = field(default=False)
    taken_over: bool = field(default=False)  # from an owner whose heartbeat was gone
    handover: str | None = None  # the lock's handover key, when it has one
    # What the last holder left (HELD: unknown; '': no handover kept). None when it was not read: no handover
    # key, a plain lock, or an acquire that had to be sent twice.
    handed_over: str | None = None


class LockManager:
    """Takes, renews and releases locks for one process."""

    def __init__(self, client: redis.Redis, *, ttl_seconds: float) -> None:
        self._client = client
        self._ttl_ms = int(ttl_seconds * 1000)
        # Each worker thread sends its per-job commands on a connection of its own (core/redis/thread_connections.py).
        self._lines = ThreadConnections(client)
        self._owner: Callable[[], str] | None = None
        self._release_sha = script_sha(_RELEASE)
        self._acquire_sha = script_sha(_ACQUIRE)
        self._extend = client.register_script(_EXTEND)
        # Tokens only need to be unique: a random per-process part and a counter make them so without a
        # getrandom() call per job. next() on itertools.count is atomic under the GIL.
        self._nonce = secrets.token_hex(12)
        self._serial = itertools.count(1)
        self._held: dict[str, HeldLock] = {}
        self._held_lock = threading.Lock()
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None

    @property
    def connections(self) -> ThreadConnections:
        """The worker threads' own connections, which other per-job commands (traffic control) share."""
        return self._lines

    def owned_by(self, heartbeat_key: Callable[[], str]) -> None:
        """Record this process' heartbeat key in the locks it takes, so they can be taken over once it is gone."""
        self._owner = heartbeat_key

    def acquire(self, key: str, *, handover: str | None = None) -> HeldLock | None:
        """Take the lock (or take it over from a dead owner), or return None if a live one holds it.

        With ``handover`` (the lock's handover key) the held lock says what its last holder left.
        """
        unique = f"{self._nonce}:{next(self._serial)}"
        try:
            taken = self._take(key, unique, handover)
        except DROPPED:
            # The connection was dropped (a restart, an idle timeout): try once more on a new one. The first
            # attempt may have landed before its answer was lost; then the lock is already ours, and what its
            # handover said before that attempt set it to held is lost: not read.
            taken = self._take(key, unique, handover)
            if taken is None:
                current = self._lines.call("GET", key)
                taken = (current.decode(), 0, None) if current and current.endswith(f"|{unique}".encode()) else None
            else:
                taken = (taken[0], taken[1], None)
        if taken is None:
            return None
        token, taken_over, handed_over = taken
        kept = None if self._owner is None else handover  # a plain lock never marks its handover held: it keeps none
        held = HeldLock(key, token, taken_over=bool(taken_over), handover=kept, handed_over=handed_over)
        if held.taken_over:
            log.warning("lock taken over from a dead owner", extra={"fields": {"lock_key": key}})
        with self._held_lock:
            self._held[token] = held
        self._ensure_renewer()
        return held

    def release(self, held: HeldLock, *, leaves: str | None = None) -> bool:
        """Free the lock if we still own it; False means it had expired or been taken over.

        ``leaves``: what the holder leaves the resource as, kept in the lock's handover (None: unknown).
        """
        with self._held_lock:
            self._held.pop(held.token, None)
        try:
            released = self._free(held, leaves)
        except DROPPED:
            released = self._free(held, leaves)  # once more on a new connection (a lost answer reads as not ours)
        if not released:
            held.lost = True
        return released

    def release_later(self, held: HeldLock, *, leaves: str | None = None) -> None:
        """Free the lock without waiting for Redis' answer, which this thread reads before its next command.

        A job's release then costs no round trip of its own (benchmarks/worker.py, docs/notes/performance.md).
        Commands on one connection run in order, so the release lands before anything this thread sends
        next; ``held.lost`` is set once the answer is read (a lost answer leaves it unset: the lock, freed
        or not, expires by its TTL). If it cannot be sent, :meth:`release` runs. ``leaves`` as for :meth:`release`.
        """
        with self._held_lock:
            self._held.pop(held.token, None)
        keys, args = self._release_args(held, leaves)
        try:
            # EVAL, not EVALSHA: a NOSCRIPT answer read later could not be redone before the next command.
            self._lines.send_later(("EVAL", _RELEASE, len(keys), *keys, *args), functools.partial(_released, held))
        except DROPPED:
            self.release(held, leaves=leaves)

    def renew_all(self) -> None:
        """Extend every held lock once (the renewer thread calls this every TTL/3)."""
        with self._held_lock:
            held = list(self._held.values())
        if not held:
            return
        pipe = self._client.pipeline(transaction=False)
        for lock in held:
            self._extend(keys=[lock.key], args=[lock.token, self._ttl_ms], client=pipe)
        for lock, extended in zip(held, pipe.execute(), strict=True):
            if not extended:
                lock.lost = True
                log.warning("lock lost before release", extra={"fields": {"lock_key": lock.key}})

    def _take(self, key: str, unique: str, handover: str | None) -> tuple[str, int, str | None] | None:
        if self._owner is None:  # no heartbeat in this process: a plain lock, never taken over, no handover
            token = f"|{unique}"
            return (token, 0, None) if self._lines.call("SET", key, token, "NX", "PX", self._ttl_ms) else None
        keys: list[str] = [key, self._owner()]
        args: list[str | int] = [unique, self._ttl_ms]
        if handover is not None:
            keys.append(handover)
            args.append(HANDOVER_TTL)
        taken = self._lines.script(self._acquire_sha, _ACQUIRE, keys, args)
        if not taken:
            return None
        return taken[0].decode(), int(taken[1]), taken[2].decode() if len(taken) > 2 else None

    @staticmethod
    def _release_args(held: HeldLock, leaves: str | None) -> tuple[list[str], list[str | int]]:
        if held.handover is None:
            return [held.key], [held.token]
        return [held.key, held.handover], [held.token, leaves or "", HANDOVER_TTL]

    def _free(self, held: HeldLock, leaves: str | None) -> bool:
        keys, args = self._release_args(held, leaves)
        return bool(self._lines.script(self._release_sha, _RELEASE, keys, args))

    def _ensure_renewer(self) -> None:
        if self._renewer is not None:
            return
        with self._held_lock:
            if self._renewer is None:
                self._renewer = start_repeating("calsync-lock-renewer", self._stop, self._ttl_ms / 3000, self.renew_all,
                                                log=log, failure="lock renewal failed; will retry",
                                                errors=(redis.RedisError,))  # fmt: skip

    def close(self) -> None:
        """Stop the renewer thread (held locks then expire by TTL) and give back the threads' connections."""
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join(timeout=5)
        self._lines.close()


def _released(held: HeldLock, answer: Any) -> None:
    # A definite "not ours" (0, or an error Redis answered) marks it lost; a lost answer says nothing.
    if not answer or isinstance(answer, redis.ResponseError):
        held.lost = True
